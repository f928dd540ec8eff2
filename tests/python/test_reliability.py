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


# -- one reader of the program ---------------------------------------------------------------
# The front end (libclang) reads each source with NVRTC's own arguments; the files it opened
# decide the keys, and nothing it is given kills or hangs the process.

def _child(code, tmp_path, env=None, check=True, preexec=None):
    """Runs `code` in a fresh Python with its own cache folder; returns the CompletedProcess."""
    full_env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    TORCH_CUDAJIT_CACHE_DIR=str(tmp_path / "child-cache"))
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                       capture_output=True, text=True, timeout=300, preexec_fn=preexec)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_quoted_include_is_found_in_the_working_directory(tmp_path, monkeypatch):
    """NVRTC looks for quoted includes in the program's folder, the working directory for
    "kernel.cu": so does the front end, which then sees a kernel a macro there makes."""
    (tmp_path / "make.h").write_text("#define MAKE(n) __global__ void n(float* o) { o[0] = 1; }\n")
    monkeypatch.chdir(tmp_path)
    k = cj.jit('#include "make.h"\nMAKE(made)\n')
    assert k.name == "made"
    assert ".entry" in k.compile(meta(4), arch="sm_90").ptx


def test_quoted_include_is_found_in_the_program_names_folder(cache_dir, tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "v.h").write_text("#define V 3.0f\n")
    monkeypatch.chdir(tmp_path)
    src = '#include "v.h"\n' + VALUE_KERNEL
    _, ptx1 = compile_value_kernel(src, filename="sub/kernel.cu")
    (tmp_path / "sub" / "v.h").write_text("#define V 5.0f\n")
    k2, ptx2 = compile_value_kernel(src, filename="sub/kernel.cu")
    assert (k2.cache_hits, k2.cache_misses) == (0, 1) and ptx2 != ptx1


def test_standard_option_reaches_the_front_end():
    src = ("#if __cplusplus > 201703L\n__global__ void cxx20(float* o) {}\n#endif\n"
           "__global__ void k(float* o) {}\n")
    assert sorted(cj.jit(src, options=["-std=c++20"]).names) == ["cxx20", "k"]
    assert cj.jit(src).name == "k"


def test_declarations_that_differ_by_architecture_are_reported(cache_dir):
    src = ("__global__ void k(\n#if __CUDA_ARCH__ >= 900\nfloat* o\n#else\nint* o\n#endif\n) {}\n")
    k = cj.jit(src)
    arch = cj._C.device_compute_capability(0) if torch.cuda.is_available() else 90
    other = "sm_80" if arch >= 90 else "sm_90"
    with pytest.raises(ValueError, match=f"declares kernel 'k' differently when compiled for "
                                         f"{other}"):
        k.compile(meta(4, torch.float32 if arch >= 90 else torch.int32), arch=other)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_file_as_a_header_is_refused(tmp_path, kind):
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo.h")
        src, match = f'#include "{tmp_path}/fifo.h"\n' + VALUE_KERNEL, r"\(a FIFO\)"
    else:
        src, match = '#include "/dev/zero"\n' + VALUE_KERNEL, r"'/dev/zero', which is not a regular file \(a character device\)"
    with pytest.raises(ValueError, match=match):
        cj.jit(src)


def test_deeply_nested_parameter_type_is_read():
    depth = 3000
    src = ("template <class T> struct W {};\n__global__ void k(" + "W<" * depth + "float" +
           ">" * depth + " w, float* o) {}\n")
    assert [p.name for p in cj.jit(src, cache=False).params] == ["w", "o"]


def test_full_temporary_folder_does_not_abort_the_first_parse(tmp_path):
    """A file size limit of 4 KiB (ulimit -f 4) leaves no room for the front end's precompiled
    preamble: it parses without one, and leaves nothing behind in $TMPDIR."""
    import resource
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _child(f"""
        import torch, torch_cudajit as cj
        k = cj.jit({VALUE_KERNEL!r}, defines={{"V": "1.0f"}})
        print(k.compile(torch.empty(4, device="meta"), arch="sm_90").lowered_name)
        """, tmp_path, env={"TMPDIR": str(tmp)},
        preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))
    assert "_Z1kPf" in r.stdout
    assert list(tmp.iterdir()) == []


def test_preamble_folder_of_a_killed_process_is_removed(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp / f"torch_cudajit_frontend.{dead.pid}.AbCdEf"
    left.mkdir()
    (left / "preamble.pch-1a2b3c4d").write_bytes(b"partial")
    _child(f"""
        import torch_cudajit as cj
        cj.jit({VALUE_KERNEL!r}, defines={{"V": "2.0f"}}, cache=False)
        """, tmp_path, env={"TMPDIR": str(tmp)})
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("value, reason", [
    ("text", "it is a file that cannot be loaded: "),
    ("folder", "it is not a regular file"),
    ("missing", "no such file"),
])
def test_unusable_explicit_libclang_is_an_error(tmp_path, value, reason):
    target = {"text": tmp_path / "libclang.so", "folder": tmp_path, "missing": tmp_path / "none.so"}[value]
    if value == "text":
        target.write_text("not a library\n")
        reason = "which cannot be loaded: "
    r = _child(f"""
        import torch_cudajit as cj
        cj.jit("__global__ void k(float* o) {{}}\\n// {value}\\n")
        """, tmp_path, env={"TORCH_CUDAJIT_LIBCLANG": str(target)}, check=False)
    assert r.returncode != 0
    assert f"TORCH_CUDAJIT_LIBCLANG is '{target}', which cannot be loaded" in r.stderr, r.stderr
    assert reason in r.stderr


def test_warm_process_runs_without_libclang(tmp_path):
    """A process whose reflection records and compiled kernels are all on disk needs no
    libclang: here the `libclang` package is hidden from it."""
    code = f"""
        import json, torch, torch_cudajit as cj
        k = cj.jit({SCALE!r})
        x = torch.empty(8, device="meta")
        c = k.compile(x, x, 2.0, arch="sm_90")
        print(json.dumps([cj._C.frontend_parse_count(), k.cache_hits, k.cache_misses]))
        """
    first = _child(code, tmp_path)
    assert first.stdout.strip().endswith("[1, 0, 1]")
    hidden = tmp_path / "hidden"
    (hidden / "clang").mkdir(parents=True)
    (hidden / "clang" / "__init__.py").write_text("")  # a package without the library
    second = _child(code, tmp_path, env={"PYTHONPATH": f"{hidden}{os.pathsep}{REPO}"})
    assert second.stdout.strip().endswith("[0, 1, 0]"), second.stdout + second.stderr


@pytest.mark.parametrize("options, message", [
    (["-DA=1\x00-DB=2"], r"options\[0\] is '-DA=1\\0-DB=2', which holds a NUL byte"),
    (["-DOK", "--use_fast_math\x00"], r"options\[1\] is '--use_fast_math\\0'"),
])
def test_option_with_a_nul_byte_is_a_value_error(options, message):
    with pytest.raises(ValueError, match=message):
        cj.jit(VALUE_KERNEL, options=options)


@pytest.mark.parametrize("filename, message", [
    ("ker\x00nel.cu", r"filename is 'ker\\0nel.cu'"),
    ("ker\nnel.cu", r"filename is 'ker\\nnel.cu'"),
    ("", r"filename is ''"),
])
def test_bad_filename_is_a_value_error(filename, message):
    with pytest.raises(ValueError, match=message):
        cj.jit(VALUE_KERNEL.replace("V", "1.0f"), filename=filename)


def test_filename_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="filename must be a str, got int"):
        cj.jit(VALUE_KERNEL, filename=3)


@pytest.mark.parametrize("directive", ["#warning", "#error"])
def test_latin1_text_in_the_compiler_log_decodes(tmp_path, directive):
    """NVRTC echoes a Latin-1 header's bytes in its log; the log reaches Python as text."""
    (tmp_path / "latin1.h").write_bytes(f"{directive} caf\xe9 au lait\n".encode("latin-1"))
    k = cj.jit('#include "latin1.h"\n' + VALUE_KERNEL.replace("V", "1.0f"),
               include_dirs=[str(tmp_path)], cache=False)
    if directive == "#warning":
        c = k.compile(meta(4), arch="sm_90")
        assert "café au lait" in c.log
    else:
        with pytest.raises(cj.CompileError) as e:
            k.compile(meta(4), arch="sm_90")
        assert "café au lait" in e.value.log and "café au lait" in str(e.value)


def test_cache_folder_that_is_a_file_says_so(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    before = cj.cache.settings()
    cj.cache.configure(dir=tmp_path / "file", enabled=True)
    try:
        with pytest.warns(UserWarning, match=r"cannot create the cache folder '.*file' \(Not a directory\)"):
            compile_value_kernel(VALUE_KERNEL, defines={"V": "7.0f"})
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"], max_bytes=before["max_bytes"])


def test_cache_false_reads_and_writes_no_record(cache_dir):
    src = "#define V 9.0f\n" + VALUE_KERNEL
    k, _ = compile_value_kernel(src, cache=False)
    assert (k.cache_hits, k.cache_misses) == (0, 0)
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []
    compile_value_kernel(src)
    assert {p.suffix for p in cache_dir.iterdir() if not p.name.endswith(".lock")} == {".cj", ".cjr", ".cjm"}


def test_reflection_records_count_against_the_bound_and_prune(cache_dir):
    compile_value_kernel("#define V 8.0f\n" + VALUE_KERNEL)
    assert list(cache_dir.glob("*.cjr")) and list(cache_dir.glob("*.cjm"))
    total = sum(p.stat().st_size for p in cache_dir.iterdir() if p.suffix in (".cj", ".cjr", ".cjm"))
    assert cj.cache.info()["bytes"] == total
    cj.cache.prune(0)
    assert not [p for p in cache_dir.iterdir() if p.suffix in (".cj", ".cjr", ".cjm")]


def test_foreign_reflection_record_is_refused_with_a_warning(tmp_path):
    """Another source's valid record copied over this source's is not read as this one's."""
    a = "__global__ void k(const float* x, float* y) {}\n"
    b = "__global__ void k(float* x, const float* y) {}\n"
    before = cj.cache.settings()
    try:
        cj.cache.configure(dir=tmp_path / "a", enabled=True)
        cj.jit(a)
        (record_a,) = (tmp_path / "a").glob("*.cjr")
        cj.cache.configure(dir=tmp_path / "b", enabled=True)
        cj.jit(b)
        (record_b,) = (tmp_path / "b").glob("*.cjr")
        record_b.write_bytes(record_a.read_bytes())
        with pytest.warns(UserWarning, match="the reflection record was stored under the key"):
            k = cj.jit(b)
        assert [p.role for p in k.params] == ["output", "input"]
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"], max_bytes=before["max_bytes"])
