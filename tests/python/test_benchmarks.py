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


def _benchmark(name: str) -> types.SimpleNamespace:
    """A benchmark script's globals, without running its main (its functions share them)."""
    return types.SimpleNamespace(**runpy.run_path(os.path.join(REPO, "benchmarks", f"{name}.py"),
                                                  run_name=name))


def _rotary_operands(device, b=2, t=16, h=4, d=64):
    """(qkv, q, out, cos, sin): q a (b, t, h, d) view at the start of qkv, as in the LLaMA
    block; random values, the output poisoned."""
    qkv = torch.randn(b, t, 3 * h * d, device=device).to(torch.bfloat16)
    q = qkv[..., : h * d].view(b, t, h, d)
    out = torch.full((b, t, h, d), float("nan"), device=device, dtype=torch.bfloat16)
    cos, sin = (torch.randn(t, d, device=device).to(torch.bfloat16) for _ in range(2))
    return qkv, q, out, cos, sin


def test_run_kernel_probe_variants_compile():
    """Every variant of benchmarks/run_kernel_probe.py compiles for sm_90 (no GPU needed)."""
    probe = _benchmark("run_kernel_probe")
    qkv, q, out, cos, sin = (x.to("meta") for x in _rotary_operands("cpu"))
    variants = probe.kernels(*q.shape[1:])
    assert [tag for tag, _, _ in variants] == [v[0] for v in probe.VARIANTS]
    for tag, kernel, _ in variants:
        compiled = kernel.compile(*probe.launch_args(out, qkv, q, cos, sin), arch="sm_90")
        assert compiled.ptx.count(".entry") == 1, tag


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", [(2, 16, 4, 64), (3, 5, 2, 32)], ids=str)
def test_run_kernel_probe_variants_match_the_float_reference(shape):
    """Each hand-written rotary variant against the function computed in float32 and rounded
    once, as the kernels compute it, over a run count that leaves some threads of the last
    iteration without a run."""
    probe = _benchmark("run_kernel_probe")
    qkv, q, out, cos, sin = _rotary_operands("cuda", *shape)
    want = probe.reference(q, cos, sin)
    for tag, kernel, u in probe.kernels(*shape[1:]):
        out.fill_(float("nan"))
        runs = out.numel() // 8
        kernel[-(-runs // (probe.BLOCK * u)), probe.BLOCK](*probe.launch_args(out, qkv, q, cos, sin))
        torch.testing.assert_close(out, want, rtol=1e-2, atol=1e-2, msg=lambda m, tag=tag: f"{tag}: {m}")


def test_backend_benchmark_steady_state_is_the_median_over_warm_processes():
    """--steady-processes 3: a cold process, then three warm ones; the steady state is their
    median, the warm start the first warm process's (no GPU: the children are stand-ins)."""
    bench = _benchmark("backend")
    figures = iter([{"first_s": 3.0, "steady_ms": 0.9}, {"first_s": 1.0, "steady_ms": 0.7},
                    {"first_s": 0.5, "steady_ms": 0.4}, {"first_s": 0.6, "steady_ms": 0.5}])
    calls = []

    def child(model_name, backend, cache_dir, reps):
        calls.append((model_name, backend, cache_dir))
        return next(figures)
    bench.measure.__globals__["run_child"] = child
    rows = bench.measure("llama", 50, backends=["cudajit"], steady_processes=3)
    assert len(calls) == 4 and len({c[2] for c in calls}) == 1  # one cache for all four
    assert rows["cudajit"]["cold"] == {"first_s": 3.0, "steady_ms": 0.9}
    assert rows["cudajit"]["warm"] == {"first_s": 1.0, "steady_ms": 0.5,
                                       "steady_runs_ms": [0.7, 0.4, 0.5]}


def test_backend_benchmark_refuses_a_process_count_below_one(capsys, monkeypatch):
    bench = _benchmark("backend")
    monkeypatch.setattr("sys.argv", ["backend.py", "--steady-processes", "0"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--steady-processes: 0 is not a process count; expected 1 or more" in capsys.readouterr().err


@pytest.mark.parametrize("with_floor", [True, False])
def test_backend_benchmark_gives_each_compile_target_its_floor(with_floor):
    """The verdicts on cold compile and warm start give aot_eager's first call (Dynamo and
    AOTAutograd alone) as a fraction of Inductor's when it was measured."""
    bench = _benchmark("backend")

    def row(cold, warm, ms):
        return {"cold": {"first_s": cold, "steady_ms": ms}, "warm": {"first_s": warm, "steady_ms": ms}}
    rows = {"eager": row(0, 0, 1.0), "inductor": row(4.0, 1.0, 0.5), "cudajit": row(1.0, 0.5, 0.4)}
    if with_floor:
        rows["aot_eager"] = row(0.6, 0.3, 0.9)
    text = bench.table({"resnet": rows})
    assert "- resnet, cold compile: 0.250 of Inductor's (target 0.1" in text
    assert "- resnet, steady state vs Inductor: 1.25x (target 0.95x)" in text
    floors = ["; Dynamo and AOTAutograd alone (aot_eager) 0.150)",
              "; Dynamo and AOTAutograd alone (aot_eager) 0.300)"]
    assert all((f in text) == with_floor for f in floors), text
    assert ("| resnet | aot_eager | 0.60 | 0.30 | 0.900 |" in text) == with_floor
