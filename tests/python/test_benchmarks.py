"""benchmarks/run_all.py, which writes benchmarks/RESULTS.md in one command: the sections it
writes, how a benchmark's own markdown is nested under them, and the refusal of unknown names.
The benchmarks themselves are measured on the GPU machine, never timed in tests."""
from __future__ import annotations

import os
import runpy
import types

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_ALL = types.SimpleNamespace(**runpy.run_path(os.path.join(REPO, "benchmarks", "run_all.py"),
                                                 run_name="run_all"))


def test_every_benchmark_script_is_run():
    scripts = {f[:-3] for f in os.listdir(os.path.join(REPO, "benchmarks"))
               if f.endswith(".py") and not f.startswith("_") and f != "run_all.py"}
    assert {b.name for b in RUN_ALL.BENCHMARKS} == scripts


@pytest.mark.parametrize("line, want", [
    ("# launch overhead, H200", ["*launch overhead, H200*", ""]),
    ("## float32", ["#### float32"]),
    ("| a | b |", ["| a | b |"]),
])
def test_a_benchmarks_headings_nest_under_its_section(line, want):
    assert RUN_ALL._as_section_body(line + "\n|x|").split("\n") == want + ["|x|"]


def test_docstring_becomes_the_section_text_without_the_run_line():
    text = RUN_ALL._description("launch_overhead")
    assert text.startswith("Launch overhead:") and "Floor:" in text and "Run:" not in text


def test_unknown_benchmark_is_refused(capsys):
    with pytest.raises(SystemExit):
        RUN_ALL.main(["--only", "launch_overhead,bogus"])
    assert "--only: unknown benchmark(s) bogus; expected some of launch_overhead" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU this would run the benchmark")
def test_writes_a_header_and_one_section_per_benchmark(tmp_path):
    out = tmp_path / "RESULTS.md"
    assert RUN_ALL.main(["--only", "launch_overhead,op_overhead", "--output", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Benchmark results\n")
    for row in ("| date |", "| GPU, driver | none |", "| torch |", "| torch_cudajit |", "| commit |"):
        assert row in text
    assert "## launch_overhead (`python benchmarks/launch_overhead.py --markdown`)" in text
    assert "## op_overhead (`python benchmarks/op_overhead.py`)" in text
    assert text.count("Not run: this machine has no GPU.") == 2


def test_update_replaces_only_the_sections_run_now(tmp_path, monkeypatch):
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\nheader\n\n"
                   "## launch_overhead (`x`)\n\n*Run old.*\n\nold launch table\n\n"
                   "## cluster (`y`)\n\n*Run old.*\n\nold cluster table\n")
    monkeypatch.setitem(RUN_ALL.main.__globals__, "run",
                        lambda bench, quick, has_gpu: f"## {bench.name} (`cmd`)\n\nnew {bench.name} table\n")
    assert RUN_ALL.main(["--only", "cluster,nvrtc_scaling", "--update", "--output", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Benchmark results\n\nheader\n")
    assert "old launch table" in text and "old cluster table" not in text
    assert "new cluster table" in text and "new nvrtc_scaling table" in text
    # The benchmarks' order, whatever order the file or the run had.
    assert text.index("## launch_overhead") < text.index("## nvrtc_scaling") < text.index("## cluster")
    assert text.count("*Run ") == 3 and "commit" in text.split("## cluster")[1]
