"""Regression tests for what adversarial use found: the cache key follows every header the
compiler reads (or the disk cache is skipped), option order that changes the code changes the
key, nothing named like a cache file can hang a compile, existing folders are never chmod'ed,
crafted pickles raise or recompile instead of crashing, jit is linear in the number of kernels,
and bad launch configurations and sizes raise TypeError/ValueError naming the value.
Everything here compiles for sm_90 on CPU; GPU-only checks live in test_reliability_gpu.py."""
from __future__ import annotations

import os
import pickle
import re
import stat
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch

import torch_cudajit as cj
from _support import SCALE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def meta(n=8, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def compile_value_kernel(src, **options):
    """Compiles a kernel that stores a compile-time value V; returns (kernel, ptx)."""
    k = cj.jit(src, **options)
    c = k.compile(meta(4), arch="sm_90")
    return k, c.ptx


# -- 1. the key follows what the compiler reads --------------------------------------------------

VALUE_KERNEL = "__global__ void k(float* out) { out[threadIdx.x] = V; }\n"


@pytest.mark.parametrize("include", [
    '#include /* a comment */ "v.h"\n',
    '#include \\\n  "v.h"\n',
    '# /* directive split */ include "v.h" // trailing\n',
], ids=["comment", "continued", "spaced"])
def test_header_edit_misses_whatever_the_include_spelling(cache_dir, tmp_path, include):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "v.h").write_text("#define V 3.0f\n")
    src = include + VALUE_KERNEL
    k1, ptx1 = compile_value_kernel(src, include_dirs=[str(inc)])
    assert (k1.cache_hits, k1.cache_misses) == (0, 1)
    (inc / "v.h").write_text("#define V 5.0f\n")
    k2, ptx2 = compile_value_kernel(src, include_dirs=[str(inc)])
    assert (k2.cache_hits, k2.cache_misses) == (0, 1)
    assert ptx2 != ptx1


def test_pre_included_header_is_in_the_key(cache_dir, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "v.h").write_text("#define V 3.0f\n")
    opts = dict(include_dirs=[str(inc)], options=["--pre-include=v.h"])
    k1, ptx1 = compile_value_kernel(VALUE_KERNEL, **opts)
    k1b, _ = compile_value_kernel(VALUE_KERNEL, **opts)
    assert (k1b.cache_hits, k1b.cache_misses) == (1, 0)
    (inc / "v.h").write_text("#define V 5.0f\n")
    k2, ptx2 = compile_value_kernel(VALUE_KERNEL, **opts)
    assert (k2.cache_hits, k2.cache_misses) == (0, 1)
    assert ptx2 != ptx1


@pytest.mark.parametrize("source", [
    '#include HDR\n' + VALUE_KERNEL,
    '#if __has_include(HDR)\n#include "v.h"\n#endif\n' + VALUE_KERNEL,
], ids=["include", "has_include"])
def test_header_named_through_a_macro_is_followed(cache_dir, tmp_path, source):
    """The preprocessor that reads the source resolves computed includes: such a source keeps
    the disk cache, and an edit of the header it names is seen."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "v.h").write_text("#define V 3.0f\n")
    opts = dict(include_dirs=[str(inc)], defines={"HDR": '"v.h"'})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k1, ptx1 = compile_value_kernel(source, **opts)
        k1b, _ = compile_value_kernel(source, **opts)
    assert (k1.cache_hits, k1.cache_misses) == (0, 1)
    assert (k1b.cache_hits, k1b.cache_misses) == (1, 0)
    (inc / "v.h").write_text("#define V 5.0f\n")
    k2, ptx2 = compile_value_kernel(source, **opts)
    assert (k2.cache_hits, k2.cache_misses) == (0, 1)
    assert ptx2 != ptx1  # the edit is seen: nothing stale was served


def test_has_include_of_a_literal_name_is_in_the_key(cache_dir, tmp_path):
    """Whether a header exists decides what compiles: creating it must miss."""
    inc = tmp_path / "inc"
    inc.mkdir()
    src = ('#if __has_include("opt.h")\n#include "opt.h"\n#else\n#define V 1.0f\n#endif\n'
           + VALUE_KERNEL)
    k1, ptx1 = compile_value_kernel(src, include_dirs=[str(inc)])
    assert (k1.cache_hits, k1.cache_misses) == (0, 1)
    (inc / "opt.h").write_text("#define V 4.0f\n")
    k2, ptx2 = compile_value_kernel(src, include_dirs=[str(inc)])
    assert (k2.cache_hits, k2.cache_misses) == (0, 1)
    assert ptx2 != ptx1


@pytest.mark.parametrize("header", ["cmath", "limits", "cstdio", "algorithm", "cuda_fp16.h"])
def test_standard_headers_keep_the_disk_cache(cache_dir, header):
    """The plugin's own stand-in headers (and the prelude every kernel gets) are exact."""
    src = f"#include <{header}>\n" + VALUE_KERNEL
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k1, _ = compile_value_kernel(src, defines={"V": "2.0f"})
        k2, _ = compile_value_kernel(src, defines={"V": "2.0f"})
    assert (k1.cache_misses, k2.cache_hits) == (1, 1)


def test_define_order_of_one_macro_is_in_the_key(cache_dir):
    src = VALUE_KERNEL
    _, ptx_12 = compile_value_kernel(src, options=["-DV=1.0f", "-DV=2.0f"])
    k, ptx_21 = compile_value_kernel(src, options=["-DV=2.0f", "-DV=1.0f"])
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    assert ptx_12 != ptx_21
    k, _ = compile_value_kernel(src, options=["-DV=2.0f", "-UV", "-DV=1.0f"])
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    # Different macros commute: their order does not split the cache.
    _, _ = compile_value_kernel(src, options=["-DV=1.0f", "-DW=2"])
    k, _ = compile_value_kernel(src, options=["-DW=2", "-DV=1.0f"])
    assert (k.cache_hits, k.cache_misses) == (1, 0)


# -- 3. no hang ------------------------------------------------------------------------------


def _entry_names(cache_dir):
    return sorted(p.name for p in cache_dir.iterdir() if p.suffix == ".cj")


def test_fifo_named_like_an_entry_does_not_hang(cache_dir):
    k, _ = compile_value_kernel("#define V 1.0f\n" + VALUE_KERNEL)
    (name,) = _entry_names(cache_dir)
    entry = cache_dir / name
    entry.unlink()
    os.mkfifo(entry)
    lock = cache_dir / (name[:-3] + ".lock")
    if lock.exists():
        lock.unlink()
    os.mkfifo(lock)
    done = []
    t = threading.Thread(target=lambda: done.append(compile_value_kernel("#define V 1.0f\n" + VALUE_KERNEL)),
                         daemon=True)
    t.start()
    t.join(timeout=120)
    assert done, "a compile blocked on a FIFO in the cache folder"
    assert stat.S_ISFIFO(os.lstat(entry).st_mode) or entry.is_file()


# -- concurrent processes killed with SIGKILL -----------------------------------------------

_COMPILE_FOREVER = """
import itertools, sys, torch, torch_cudajit as cj
src = sys.argv[1]
dtypes = [torch.float32, torch.float64, torch.float16, torch.int32]
for i in itertools.count():
    d = dtypes[i % 4]
    k = cj.jit(src, defines={"VARIANT": i % 6})
    x = torch.empty(8, device="meta", dtype=d)
    k.compile(x, x, 2, arch="sm_90")
    print(i, flush=True)
"""

KILLED_SRC = SCALE.replace("a * x[i]", "a * x[i] + T(VARIANT)")


def test_processes_killed_mid_compile_leave_a_usable_cache(cache_dir):
    """Four processes compile the same 24 specializations and are killed with SIGKILL while they
    write entries and hold per-key locks; a new process then loads every entry it finds without
    a warning, compiles the rest, and gets the code a cache-less compile gives."""
    import signal
    import time
    env = dict(os.environ, TORCH_CUDAJIT_CACHE_DIR=str(cache_dir),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for delay in (0, 3, 7):  # how many compiles each process finishes before the kill
        procs = [subprocess.Popen([sys.executable, "-c", _COMPILE_FOREVER, KILLED_SRC], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        for p in procs:  # each is compiling (or loading) when it is killed
            for _ in range(delay + 1):
                line = p.stdout.readline()
                assert line, p.stderr.read()
        time.sleep(0.01 * delay)
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(timeout=60)
            p.stdout.close()
            p.stderr.close()
    check = """
import json, sys, warnings, torch, torch_cudajit as cj
warnings.simplefilter("error")
src = sys.argv[1]
out = {}
for v in range(6):
    for d in (torch.float32, torch.float64, torch.float16, torch.int32):
        x = torch.empty(8, device="meta", dtype=d)
        cached = cj.jit(src, defines={"VARIANT": v}).compile(x, x, 2, arch="sm_90")
        fresh = cj.jit(src, defines={"VARIANT": v}, cache=False).compile(x, x, 2, arch="sm_90")
        assert cached.cubin == fresh.cubin, (v, d)
print(json.dumps(cj.cache.stats()))
"""
    r = subprocess.run([sys.executable, "-c", check, KILLED_SRC], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    # Every specialization has exactly one complete entry; the killed writers' temporary files
    # are never taken for entries (prune removes them once they are an hour old).
    cj.cache.prune()
    assert cj.cache.info()["entries"] == 24
    assert len([p for p in cache_dir.iterdir() if p.suffix == ".cj"]) == 24


# -- 5. permissions ----------------------------------------------------------------------------


def test_existing_folder_is_never_chmoded(tmp_path):
    before = cj.cache.settings()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    readable = tmp_path / "readable"
    readable.mkdir()
    os.chmod(readable, 0o755)
    try:
        cj.cache.configure(dir=shared, enabled=True)
        with pytest.warns(UserWarning, match=r"can be written by other users \(mode 1777\)"):
            k, _ = compile_value_kernel("#define V 7.0f\n" + VALUE_KERNEL)
        assert (k.cache_hits, k.cache_misses) == (0, 0)
        assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
        assert list(shared.iterdir()) == []
        cj.cache.configure(dir=readable, enabled=True)
        k, _ = compile_value_kernel("#define V 8.0f\n" + VALUE_KERNEL)
        assert (k.cache_hits, k.cache_misses) == (0, 1)
        assert stat.S_IMODE(os.stat(readable).st_mode) == 0o755
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"], max_bytes=before["max_bytes"])


def test_created_folder_is_private(tmp_path):
    before = cj.cache.settings()
    try:
        cj.cache.configure(dir=tmp_path / "new" / "cache", enabled=True)
        compile_value_kernel("#define V 9.0f\n" + VALUE_KERNEL)
        assert stat.S_IMODE(os.stat(tmp_path / "new" / "cache").st_mode) == 0o700
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"], max_bytes=before["max_bytes"])


# -- 4. crafted pickles ----------------------------------------------------------------------


def _pickled_scale():
    k = cj.jit(SCALE)
    k.compile(meta(), meta(), 2.0, arch="sm_90")
    reducer, args = k.__reduce__()
    return reducer, list(args)


def _rebuild_with(mutate):
    reducer, args = _pickled_scale()
    (key, data, digest), = args[3]  # (version, definition state, extensions, compiled)
    args[3] = [mutate(bytearray(key), bytearray(data), digest)]
    return reducer(*args)


@pytest.mark.parametrize("mutate, message", [
    (lambda k, d, h: (bytes(k[:4]) + (200).to_bytes(4, "little") + bytes(k[8:]), bytes(d), h),
     "claims 200 parameter"),
    (lambda k, d, h: (bytes(k[:4]) + (4).to_bytes(4, "little") + bytes(k[8:]) + bytes(4), bytes(d), h),
     "has 4 parameter.*the kernel has 3"),
    (lambda k, d, h: (bytes(k[:8]) + bytes([9]) + bytes(k[9:]), bytes(d), h),
     "parameter 'out' has argument kind 9"),
    (lambda k, d, h: (bytes(k[:9]) + bytes([77]) + bytes(k[10:]), bytes(d), h),
     "parameter 'out' has dtype code 77"),
    (lambda k, d, h: ((80).to_bytes(4, "little") + bytes(k[4:]), bytes(d), h),
     "was compiled for 'sm_90', not for sm_80"),
    (lambda k, d, h: (bytes(k), bytes(d[:-1]) + bytes([d[-1] ^ 1]), h),
     "does not match its recorded SHA-256"),
    (lambda k, d, h: (bytes(k), bytes(d), "0" * 64),
     "does not match its recorded SHA-256"),
], ids=["too-many-params", "more-params-than-kernel", "bad-kind", "bad-dtype", "other-arch",
        "flipped-byte", "wrong-digest"])
def test_crafted_pickle_warns_and_recompiles(mutate, message):
    with pytest.warns(RuntimeWarning, match=message):
        kernel = _rebuild_with(mutate)
    assert kernel.signatures == []  # nothing adopted; the kernel compiles again when launched
    c = kernel.compile(meta(), meta(), 2.0, arch="sm_90")
    assert c.cubin


def test_pickle_from_another_kernel_is_not_adopted():
    reducer, args = _pickled_scale()
    other = SCALE.replace("a * x[i]", "a + x[i]")
    # The same key layout, another source: the instantiation still matches.
    args[1] = cj.jit(other)._definition.state
    kernel = reducer(*args)
    assert kernel.signatures  # adopting is about shape, not about trusting the code: see README
    args[1] = cj.jit(SCALE.replace("T a)", "T a, int extra)"))._definition.state
    with pytest.warns(RuntimeWarning, match="has 3 parameter.*the kernel has 4"):
        kernel = reducer(*args)
    assert kernel.signatures == []


@pytest.mark.parametrize("reflection", [True, False], ids=["with-reflection", "before-reflection"])
def test_pickles_from_before_the_definition_state_still_load(reflection):
    # Earlier releases pickled (version, source, filename, name, options, extensions,
    # compiled[, reflection]); such pickles still load and adopt their code.
    from torch_cudajit._kernel import _rebuild_kernel
    _, args = _pickled_scale()
    k = cj.jit(SCALE)
    options = dict(options=[], std="c++17", debug=False, lineinfo=False, template_args="")
    old = (args[0], SCALE, "kernel.cu", "scale", options, (), args[3])
    extra = (cj._C.Program(SCALE).reflection,) if reflection else ()
    kernel = _rebuild_kernel(*old, *extra)
    assert len(kernel.signatures) == 1
    assert kernel.options["cache"] is True and kernel.options["cooperative"] is None
    assert kernel._definition.fingerprint == k._definition.fingerprint


def test_pickle_round_trip_still_adopts():
    reducer, args = _pickled_scale()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = reducer(*args)
    assert len(kernel.signatures) == 1
    assert pickle.loads(pickle.dumps(kernel)).signatures == kernel.signatures


def test_weights_only_load_refuses_kernel_pickles(tmp_path):
    k = cj.jit(SCALE)
    path = tmp_path / "k.pt"
    torch.save({"kernel": k}, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(path, weights_only=True)


# -- 6. linear-time jit ----------------------------------------------------------------------


def test_many_kernels_are_read_once(monkeypatch):
    """cj.jit of a module reflects the source once, not once per kernel."""
    n = 200
    src = "\n".join(f"__global__ void k{i}(float* o) {{ o[{i}] = {i}.0f; }}" for i in range(n))
    calls = []
    real = cj._C.Program

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a, **kw):
            calls.append(1)
            super().__init__(*a, **kw)

    monkeypatch.setattr(cj._C, "Program", Counting)
    mod = cj.jit(src)
    assert len(mod.names) == n
    assert len(calls) <= 1
    assert mod.k199.compile(meta(), arch="sm_90").cubin


def test_configured_kernel_is_freed():
    """kernel[grid, block] caches a launcher that calls back into the kernel: the cycle goes
    through C++, and the garbage collector must still see it (else every configured kernel and
    its compiled code would live forever)."""
    import gc
    import weakref
    k = cj.jit("__global__ void k(float* o) { o[0] = 1.0f; }")
    k[1, 32]
    k[(2, 2), (8, 4)]
    ref = weakref.ref(k)
    del k
    gc.collect()
    assert ref() is None


# -- 7. errors that name the bad value -------------------------------------------------------


@pytest.mark.parametrize("config, error, message", [
    ((2 ** 70, 1), ValueError, r"grid extent 1180591620717411303424 does not fit in 64 bits"),
    (((1, 2 ** 70), 1), ValueError, r"grid extent 1180591620717411303424"),
    ((1, 2 ** 64), ValueError, r"block extent 18446744073709551616"),
    ((True, 1), TypeError, r"grid must be ints, got the bool True"),
    ((1, (32, False)), TypeError, r"block must be ints, got the bool False"),
    ((1, 1, -1), ValueError, r"stream must be a raw CUstream handle .* got -1"),
    ((1, 1, 2 ** 64), ValueError, r"stream must be a raw CUstream handle .* got 18446744073709551616"),
    ((1.5, 1), TypeError, r"grid must be an int or a tuple"),
], ids=["huge-grid", "huge-grid-y", "huge-block", "bool-grid", "bool-block", "negative-stream",
        "huge-stream", "float-grid"])
def test_bad_launch_configuration_names_the_value(config, error, message):
    k = cj.jit(SCALE)
    with pytest.raises(error, match=message):
        k[config]


@pytest.mark.parametrize("size", ["1e400", "inf", "nan", "99999999999T"])
def test_cli_rejects_sizes_that_do_not_fit(tmp_path, size):
    env = dict(os.environ, TORCH_CUDAJIT_CACHE_DIR=str(tmp_path),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "torch_cudajit", "cache", "prune", "--max-bytes", size],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"{size!r}" in r.stderr and ("too large" in r.stderr or "not a size" in r.stderr)


def test_complex_scalar_for_a_real_parameter_is_a_type_error():
    k = cj.jit("__global__ void k(float* out, float a) { out[0] = a; }")
    with pytest.raises(TypeError, match=r"parameter 'a' \(float\) of kernel 'k' cannot take a Python complex"):
        k.compile(meta(), 1 + 2j, arch="sm_90")
    t = cj.jit(SCALE)
    with pytest.raises(TypeError, match=r"parameter 'a' \(T\) of kernel 'scale' .*complex"):
        t.compile(meta(), meta(), 1 + 2j, arch="sm_90")


def test_nul_byte_in_source_is_a_value_error():
    with pytest.raises(ValueError, match=r"NUL byte at offset 6"):
        cj.jit("__glob\0al__ void k() {}")
