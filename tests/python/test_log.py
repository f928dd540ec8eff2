"""What torch_cudajit reports through Python's logging (TORCH_CUDAJIT_LOG) and the folder of
generated sources (TORCH_CUDAJIT_DUMP). Runs without a GPU: compiles target sm_90."""
import logging
import os
import subprocess
import sys

import pytest
import torch

import torch_cudajit as cj

SOURCE = "template <class T> __global__ void s(cj::Array<T, 1> o, cj::Array<const T, 1> x, T a) {}"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = """
import torch, torch_cudajit as cj
k = cj.jit(%r)
k.compile(torch.empty(4), torch.empty(4), 1.0, arch="sm_90")
b = cj.jit("__global__ void bad(float* o) { o[0] = nope; }", cache=False)
try:
    b.compile(torch.empty(1), arch="sm_90")
except cj.CompileError as e:
    print("ERROR", str(e).splitlines()[1])
""" % SOURCE


def run_child(tmp_path, **env):
    full = dict(os.environ, TORCH_CUDAJIT_CACHE_DIR=str(tmp_path / "cache"), **env)
    full["PYTHONPATH"] = REPO + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", CHILD], env=full, capture_output=True, text=True,
                          timeout=300)


def test_compiles_are_logged_in_memory(caplog):
    k = cj.jit(SOURCE, cache=False)
    with caplog.at_level(logging.INFO, logger="torch_cudajit"):
        k.compile(torch.empty(4, dtype=torch.float16), torch.empty(4, dtype=torch.float16), 1.0,
                  arch="sm_90")
        k.compile(torch.empty(4, dtype=torch.float16), torch.empty(4, dtype=torch.float16), 1.0,
                  arch="sm_90")
    lines = [r.getMessage() for r in caplog.records if r.name == "torch_cudajit"]
    # One line for the one compile: the second call is answered from memory, silently.
    assert lines == ["kernel 's' (Array<float16, 1, contiguous>, Array<const float16, 1, "
                     "contiguous>, float) for sm_90: compiled (disk cache not used), "
                     + lines[0].rsplit(", ", 1)[1]], lines
    assert lines[0].endswith(" ms")


def test_nothing_is_logged_below_the_loggers_level(caplog):
    k = cj.jit(SOURCE, cache=False)
    with caplog.at_level(logging.WARNING, logger="torch_cudajit"):
        k.compile(torch.empty(4, dtype=torch.float64), torch.empty(4, dtype=torch.float64), 1.0,
                  arch="sm_90")
    assert [r for r in caplog.records if r.name == "torch_cudajit"] == []


@pytest.mark.parametrize("level, debug", [("info", False), ("1", False), ("debug", True), ("+", True)])
def test_the_environment_variable_prints_reads_compiles_and_cache_outcomes(tmp_path, level, debug):
    first = run_child(tmp_path, TORCH_CUDAJIT_LOG=level)
    assert first.returncode == 0, first.stderr
    err = first.stderr
    assert "[torch_cudajit INFO] read 'kernel.cu' for sm_90: kernels s; declarations read by the " \
           "front end, " in err, err
    assert "[torch_cudajit INFO] kernel 's' (Array<float32, 1, contiguous>, Array<const float32, " \
           "1, contiguous>, float) for sm_90: compiled, stored in the disk cache, " in err, err
    assert ("[torch_cudajit DEBUG] NVRTC compiled 'kernel.cu' (s) for sm_90 in " in err) is debug
    # A second process finds both in the disk cache.
    second = run_child(tmp_path, TORCH_CUDAJIT_LOG=level).stderr
    assert "declarations from the disk cache, " in second, second
    assert "for sm_90: disk cache hit, " in second, second


def test_unset_or_off_prints_nothing(tmp_path):
    for env in ({}, {"TORCH_CUDAJIT_LOG": "0"}, {"TORCH_CUDAJIT_LOG": "off"}):
        out = run_child(tmp_path, **env)
        assert out.returncode == 0 and "[torch_cudajit" not in out.stderr, out.stderr


def test_the_dump_folder_holds_what_nvrtc_compiled_and_errors_name_it(tmp_path):
    dump = tmp_path / "dump"
    out = run_child(tmp_path, TORCH_CUDAJIT_DUMP=str(dump))
    assert out.returncode == 0, out.stderr
    files = sorted(os.listdir(dump))
    assert len(files) == 2 and all(f.startswith("kernel-") and f.endswith(".cu") for f in files)
    texts = [open(dump / f).read() for f in files]
    assert any("o[0] = nope;" in t for t in texts) and any("cj::Array<T, 1" in t for t in texts)
    cited = out.stdout.split("ERROR The source NVRTC compiled (TORCH_CUDAJIT_DUMP): ")[1].strip()
    assert os.path.dirname(cited) == str(dump) and "o[0] = nope;" in open(cited).read()


def test_a_dump_folder_that_cannot_be_made_is_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = run_child(tmp_path, TORCH_CUDAJIT_DUMP=str(blocker / "sub"))
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("TORCH_CUDAJIT_DUMP names '") == 1, out.stderr
    assert "which cannot be created (Not a directory); generated sources are not dumped." in out.stderr
