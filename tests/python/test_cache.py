"""The persistent kernel cache: keys, integrity, permissions, eviction, concurrency, counters
and the command line. Everything compiles to CUBIN for sm_90, so no GPU is needed."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import torch_cudajit as cj
from _support import SCALE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def entries(folder):
    return sorted(p for p in folder.iterdir() if p.suffix == ".cj") if folder.exists() else []


def compile_scale(dtype=torch.float32, source=SCALE, **options):
    k = cj.jit(source, **options)
    x = torch.empty(8, dtype=dtype, device="meta")
    c = k.compile(x, x, 2.0, arch="sm_90")
    return k, c


def run_python(code: str, cache_folder, extra_env=None, check=True):
    env = dict(os.environ)
    env["TORCH_CUDAJIT_CACHE_DIR"] = str(cache_folder)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                       text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


CHILD = f"""
import hashlib, json, torch, torch_cudajit as cj
k = cj.jit({SCALE!r})
x = torch.empty(8, device="meta")
c = k.compile(x, x, 2.0, arch="sm_90")
print(json.dumps(dict(hits=k.cache_hits, misses=k.cache_misses,
                      cubin=hashlib.sha256(c.cubin).hexdigest(), lowered=c.lowered_name)))
"""


def test_hit_after_restart(cache_dir):
    first = json.loads(run_python(CHILD, cache_dir).stdout)
    second = json.loads(run_python(CHILD, cache_dir).stdout)
    assert (first["hits"], first["misses"]) == (0, 1)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert second["cubin"] == first["cubin"] and second["lowered"] == first["lowered"]
    assert len(entries(cache_dir)) == 1


def test_later_process_reads_the_reflection_without_libclang(cache_dir):
    # A source read before comes with its reflection from the disk cache: a process whose
    # kernels are all on disk parses nothing and never loads libclang.
    child = CHILD + textwrap.dedent("""
        import torch_cudajit._C as C
        with open("/proc/self/maps") as f:
            loaded = any("libclang" in line for line in f)
        print(json.dumps(dict(parses=C.frontend_parse_count(), libclang=loaded)))
        """)
    first = [json.loads(line) for line in run_python(child, cache_dir).stdout.splitlines()]
    second = [json.loads(line) for line in run_python(child, cache_dir).stdout.splitlines()]
    assert first[1] == dict(parses=1, libclang=True)
    assert second[1] == dict(parses=0, libclang=False)
    assert (second[0]["hits"], second[0]["misses"]) == (1, 0)
    assert second[0]["cubin"] == first[0]["cubin"]
    assert len(list(cache_dir.glob("*.cjr"))) == 1 and len(entries(cache_dir)) == 1


def test_folder_is_private(cache_dir):
    compile_scale()
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    for f in entries(cache_dir):
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600


def test_second_kernel_object_hits_and_matches(cache_dir):
    k1, c1 = compile_scale()
    k2, c2 = compile_scale()
    assert (k1.cache_hits, k1.cache_misses) == (0, 1)
    assert (k2.cache_hits, k2.cache_misses) == (1, 0)
    assert c2.cubin == c1.cubin and c2.ptx == c1.ptx and c2.lowered_name == c1.lowered_name
    assert c2.signature == c1.signature


def test_each_specialization_has_its_own_entry(cache_dir):
    for dtype in (torch.float32, torch.float64, torch.float16):
        compile_scale(dtype)
    assert len(entries(cache_dir)) == 3


def test_header_edit_misses(cache_dir, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "factor.h").write_text('#include "inner.h"\n#define FACTOR (INNER * 2)\n')
    (inc / "inner.h").write_text("#define INNER 3\n")
    src = '#include "factor.h"\n__global__ void k(float* out) { out[threadIdx.x] = FACTOR; }\n'
    x = torch.empty(4, device="meta")

    def build():
        k = cj.jit(src, include_dirs=[str(inc)])
        c = k.compile(x, arch="sm_90")
        return k, c

    k, c = build()
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    k, c_again = build()
    assert (k.cache_hits, k.cache_misses) == (1, 0)
    # Edit the header the kernel includes indirectly: the key changes, the cache misses.
    (inc / "inner.h").write_text("#define INNER 5\n")
    k, c_edited = build()
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    assert "6.0" not in c_edited.ptx or c_edited.ptx != c.ptx
    assert c_edited.ptx != c.ptx
    assert len(entries(cache_dir)) == 2


def test_separate_token_defines_are_not_confused(cache_dir):
    k1, _ = compile_scale(options=["-D", "CJT_A", "-U", "CJT_B"])
    k2, _ = compile_scale(options=["-D", "CJT_B", "-U", "CJT_A"])
    assert (k2.cache_hits, k2.cache_misses) == (0, 1)
    k3, _ = compile_scale(options=["-U", "CJT_B", "-D", "CJT_A"])
    assert (k3.cache_hits, k3.cache_misses) == (1, 0)


def test_option_order_hits(cache_dir):
    k1, _ = compile_scale(options=["-DALPHA=1", "-DBETA=2", "--extra-device-vectorization"])
    k2, _ = compile_scale(options=["--extra-device-vectorization", "-DBETA=2", "-DALPHA=1"])
    assert (k1.cache_hits, k1.cache_misses) == (0, 1)
    assert (k2.cache_hits, k2.cache_misses) == (1, 0)
    k3, _ = compile_scale(options=["-DALPHA=1", "-DBETA=3"])
    assert (k3.cache_hits, k3.cache_misses) == (0, 1)


@pytest.mark.parametrize("option", [dict(debug=True), dict(lineinfo=True), dict(std="c++20"),
                                    dict(fastmath=True), dict(defines={"X": 1})],
                         ids=["debug", "lineinfo", "std", "fastmath", "define"])
def test_each_option_is_in_the_key(cache_dir, option):
    compile_scale()
    k, _ = compile_scale(**option)
    assert (k.cache_hits, k.cache_misses) == (0, 1)


def _damage_and_recompile(cache_dir, damage, message):
    _, good = compile_scale()
    (path,) = entries(cache_dir)
    damage(path)
    with pytest.warns(UserWarning, match=message):
        k, c = compile_scale()
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    assert c.cubin == good.cubin
    # The file was replaced: the next process-level lookup hits, with no warning.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k, _ = compile_scale()
    assert (k.cache_hits, k.cache_misses) == (1, 0)


def test_corrupted_file(cache_dir):
    def flip(path):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    _damage_and_recompile(cache_dir, flip, r"is corrupted \(its checksum does not match\)")


def test_truncated_file(cache_dir):
    def truncate(path):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    _damage_and_recompile(cache_dir, truncate, "is truncated")


def test_foreign_file(cache_dir):
    def replace(path):
        path.write_bytes(b"not a cache file at all" * 10)
    _damage_and_recompile(cache_dir, replace, "not a torch_cudajit cache file")


def test_entry_of_another_key(cache_dir):
    compile_scale(torch.float64)
    (other,) = entries(cache_dir)
    data = other.read_bytes()
    other.unlink()

    def swap(path):
        path.write_bytes(data)  # a valid file, but stored under another key
    _damage_and_recompile(cache_dir, swap, "does not hold this kernel")


def test_writable_by_others_is_not_loaded(cache_dir):
    def widen(path):
        os.chmod(path, 0o666)
    _damage_and_recompile(cache_dir, widen, r"with mode 0666; only files of this user")


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_other_owner_is_not_loaded(cache_dir):
    def give_away(path):
        os.chown(path, 4242, -1)
    _damage_and_recompile(cache_dir, give_away, r"owned by uid 4242")


def test_folder_of_another_user_is_not_used(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    before = cj.cache.settings()
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 4242, -1)
    try:
        cj.cache.configure(dir=folder)
        with pytest.warns(UserWarning, match="not a folder owned by this user"):
            k, _ = compile_scale()
        assert (k.cache_hits, k.cache_misses) == (0, 0)
        assert entries(folder) == []
    finally:
        cj.cache.configure(dir=before["dir"])


def test_eviction_bound(cache_dir):
    _, c = compile_scale(torch.float32)
    (first,) = entries(cache_dir)
    size = first.stat().st_size
    # Room for about two entries: the least recently used ones go.
    cj.cache.configure(max_bytes=int(size * 2.5))
    compile_scale(torch.float64)
    os.utime(first, (1, 1))  # make the float32 entry the least recently used
    compile_scale(torch.float16)
    names = entries(cache_dir)
    assert len(names) == 2 and first not in names
    assert sum(p.stat().st_size for p in names) <= int(size * 2.5)
    # Using an entry makes it recent: after loading float64 the next store evicts float16.
    k, _ = compile_scale(torch.float64)
    assert k.cache_hits == 1
    compile_scale(torch.bfloat16)
    kept = entries(cache_dir)
    assert len(kept) == 2
    k16, _ = compile_scale(torch.float16)
    assert (k16.cache_hits, k16.cache_misses) == (0, 1)


def test_eight_processes_on_a_cold_cache(cache_dir):
    env = dict(os.environ, TORCH_CUDAJIT_CACHE_DIR=str(cache_dir),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Each child imports torch, says it is ready, then waits for a start file, so that all
    # eight ask for the kernel together.
    go, ready = cache_dir.parent / "go", cache_dir.parent / "ready"
    ready.mkdir()
    code = ("import os, time, torch, torch_cudajit\n"
            "open(os.path.join(%r, str(os.getpid())), 'w').close()\n"
            "while not os.path.exists(%r): time.sleep(0.005)\n" % (str(ready), str(go))) + CHILD
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    import time
    deadline = time.monotonic() + 300
    while len(list(ready.iterdir())) < 8 and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), "a child died before it was ready"
        time.sleep(0.01)
    go.write_text("go")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "Warning" not in err, err
        results.append(json.loads(out))
    assert sum(r["misses"] for r in results) == 1
    assert sum(r["hits"] for r in results) == 7
    assert len({r["cubin"] for r in results}) == 1
    assert len(entries(cache_dir)) == 1


def test_two_threads_one_specialization(cache_dir):
    k = cj.jit(SCALE)
    x = torch.empty(8, device="meta")
    barrier = threading.Barrier(2)
    out, errors = [], []

    def worker():
        try:
            barrier.wait()
            out.append(k.compile(x, x, 2.0, arch="sm_90"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (k.cache_hits, k.cache_misses) == (0, 1)  # compiled once
    assert len(k.signatures) == 1
    assert out[0].cubin == out[1].cubin


def test_counters(cache_dir):
    before = cj.cache.stats()
    k1, _ = compile_scale(torch.float32)
    k1.compile(torch.empty(8, dtype=torch.float64, device="meta"),
               torch.empty(8, dtype=torch.float64, device="meta"), 2.0, arch="sm_90")
    # The in-memory tier answers a repeated request: no disk lookup, no count.
    k1.compile(torch.empty(8, device="meta"), torch.empty(8, device="meta"), 2.0, arch="sm_90")
    assert (k1.cache_hits, k1.cache_misses) == (0, 2)
    k2, _ = compile_scale(torch.float64)
    assert (k2.cache_hits, k2.cache_misses) == (1, 0)
    after = cj.cache.stats()
    assert after["hits"] - before["hits"] == 1
    assert after["misses"] - before["misses"] == 2


def test_cache_false_skips_the_disk(cache_dir):
    k, _ = compile_scale(cache=False)
    assert entries(cache_dir) == []
    assert (k.cache_hits, k.cache_misses) == (0, 0)


def test_environment_switch_off(tmp_path):
    folder = tmp_path / "off"
    r = run_python(CHILD, folder, {"TORCH_CUDAJIT_CACHE": "0"})
    assert json.loads(r.stdout)["misses"] == 0
    assert not folder.exists()


def test_environment_settings(tmp_path):
    folder = tmp_path / "env"
    code = "import json, torch_cudajit as cj; print(json.dumps(cj.cache.settings()))"
    s = json.loads(run_python(code, folder, {"TORCH_CUDAJIT_CACHE_MAX_BYTES": "512M"}).stdout)
    assert s == {"enabled": True, "dir": str(folder), "max_bytes": 512 << 20, "readonly_dirs": [],
                 "writable": True}
    env = {"TORCH_CUDAJIT_CACHE_DIR": "", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    s = json.loads(run_python(code, folder, env).stdout)
    assert s["dir"] == str(tmp_path / "xdg" / "torch_cudajit")
    env = {"TORCH_CUDAJIT_CACHE_DIR": "", "XDG_CACHE_HOME": "", "HOME": str(tmp_path / "home")}
    s = json.loads(run_python(code, folder, env).stdout)
    assert s["dir"] == str(tmp_path / "home" / ".cache" / "torch_cudajit")
    for bad in ("lots", "inf", "nan", "1e30"):
        r = run_python("import warnings, torch_cudajit as cj\nwarnings.simplefilter('always')\n"
                       "print(cj.cache.settings()['max_bytes'])", folder,
                       {"TORCH_CUDAJIT_CACHE_MAX_BYTES": bad})
        assert int(r.stdout) == 4 << 30, bad


def test_configure_rejects_bad_values():
    with pytest.raises(TypeError, match="dir must be a path"):
        cj.cache.configure(dir=3)
    with pytest.raises(TypeError, match="enabled must be a bool"):
        cj.cache.configure(enabled="yes")
    with pytest.raises(ValueError, match="max_bytes must be positive, got 0"):
        cj.cache.configure(max_bytes=0)
    with pytest.raises(ValueError, match="max_bytes must be a non-negative int"):
        cj.cache.prune(-5)
    with pytest.raises(TypeError, match="cache must be a bool"):
        cj.jit(SCALE, cache=1)


def test_cli(cache_dir):
    for dtype in (torch.float32, torch.float64, torch.float16):
        compile_scale(dtype)
    stale = cache_dir / ("." + "ab" * 32 + ".123.456.tmp")  # a dead writer's temporary file
    stale.write_bytes(b"x")
    os.utime(stale, (1, 1))
    (cache_dir / "notes.txt").write_text("not the cache's")  # never touched

    def cli(*args):
        r = run_python("import sys, runpy; sys.argv = ['torch_cudajit'] + %r\n"
                       "runpy.run_module('torch_cudajit', run_name='__main__')" % list(args),
                       cache_dir)
        return r.stdout

    info = cli("cache", "info")
    assert f"directory: {cache_dir}" in info and "entries:   3" in info
    # Compiled entries, reflection records and manifests all count against the bound.
    records = sorted((p for p in cache_dir.iterdir() if p.suffix in (".cj", ".cjr", ".cjm")),
                     key=lambda p: p.stat().st_mtime_ns)
    assert {p.suffix for p in records} == {".cj", ".cjr", ".cjm"}
    newest = records[1:]
    out = cli("cache", "prune", "--max-bytes", str(sum(p.stat().st_size for p in newest)))
    # The oldest record, the stale temporary file and the three unused lock files.
    kept_entries = len([p for p in newest if p.suffix == ".cj"])
    assert f"removed 5 file(s); {kept_entries} entries" in out
    assert sorted(p for p in cache_dir.iterdir() if p.suffix in (".cj", ".cjr", ".cjm")) == sorted(newest)
    assert not stale.exists()
    assert not list(cache_dir.glob("*.lock"))
    assert (cache_dir / "notes.txt").exists()
    out = cli("cache", "clear")
    assert f"removed {len(newest)} file(s)" in out and entries(cache_dir) == []
    assert not list(cache_dir.glob("*.cjr")) and not list(cache_dir.glob("*.cjm"))
    assert (cache_dir / "notes.txt").exists()
    assert "entries:   0" in cli("cache", "info")
    r = run_python("import sys, runpy; sys.argv = ['torch_cudajit', 'cache', 'prune', "
                   "'--max-bytes', 'huge']\nrunpy.run_module('torch_cudajit', run_name='__main__')",
                   cache_dir, check=False)
    assert r.returncode != 0 and "not a size: 'huge'" in r.stderr


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_precompile_in_parallel(cache_dir, processes):
    k = cj.jit(SCALE)
    specs = [(torch.empty(8, dtype=d, device="meta"), torch.empty(8, dtype=d, device="meta"), 2.0)
             for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16)]
    specs.append(dict(out=torch.empty(4, dtype=torch.int32, device="meta"),
                      x=torch.empty(4, dtype=torch.int32, device="meta"), a=3))
    compiled = k.precompile(specs, arch="sm_90", workers=3, processes=processes, progress=False)
    assert [c.signature for c in compiled] == [
        "(Array<float32, 1, contiguous>, Array<const float32, 1, contiguous>, float)",
        "(Array<float64, 1, contiguous>, Array<const float64, 1, contiguous>, float)",
        "(Array<float16, 1, contiguous>, Array<const float16, 1, contiguous>, float)",
        "(Array<bfloat16, 1, contiguous>, Array<const bfloat16, 1, contiguous>, float)",
        "(Array<int32, 1, contiguous>, Array<const int32, 1, contiguous>, int)",
    ]
    assert (k.cache_hits, k.cache_misses) == (0, 5)
    # Three workers: batches of 2, 2 and 1 entries. A batch is stored once, with a reference
    # under each of its entries' keys; the entry alone has a record of its own.
    assert len(entries(cache_dir)) == 5 + 2
    assert len(k.signatures) == 5  # adopted by this process: launching needs no compile
    again = k.precompile(specs, arch="sm_90", workers=3, processes=processes, progress=False)
    assert [c.cubin for c in again] == [c.cubin for c in compiled]
    assert (k.cache_hits, k.cache_misses) == (0, 5)  # the in-memory tier answered
    fresh = cj.jit(SCALE)
    fresh.precompile(specs, arch="sm_90", workers=3, processes=processes, progress=False)
    assert (fresh.cache_hits, fresh.cache_misses) == (5, 0)


META_DTYPES = (torch.float32, torch.float64, torch.float16)


def meta_specs(dtypes=META_DTYPES):
    return [(torch.empty(8, dtype=d, device="meta"), torch.empty(8, dtype=d, device="meta"), 2.0)
            for d in dtypes]


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_precompile_batches_compile_as_one_program(cache_dir, processes):
    k = cj.jit(SCALE)
    before = cj._C.nvrtc_compile_count()
    compiled = k.precompile(meta_specs() + meta_specs((torch.bfloat16,)), arch="sm_90",
                            workers=2, processes=processes, progress=False)
    if not processes:  # workers compile in processes of their own, which this one cannot count
        assert cj._C.nvrtc_compile_count() - before == 2
    # Two batches of two: each pair shares one machine-code image, with a kernel of each dtype.
    assert compiled[0].cubin == compiled[1].cubin != compiled[2].cubin == compiled[3].cubin
    assert len({c.lowered_name for c in compiled}) == 4
    assert len(entries(cache_dir)) == 4 + 2
    assert (k.cache_hits, k.cache_misses) == (0, 4)
    # A new process finds each entry alone (through its batch) and compiles nothing.
    code = ("import torch, torch_cudajit as cj\n"
            f"k = cj.jit({SCALE!r})\n"
            "n = cj._C.nvrtc_compile_count()\n"
            "for d in (torch.float16, torch.bfloat16, torch.float64, torch.float32):\n"
            "    x = torch.empty(8, dtype=d, device='meta')\n"
            "    k.compile(x, x, 2.0, arch='sm_90')\n"
            "print(cj._C.nvrtc_compile_count() - n, k.cache_hits, k.cache_misses)\n")
    assert run_python(code, cache_dir).stdout.split() == ["0", "4", "0"]


def test_precompile_one_worker_compiles_one_batch(cache_dir):
    k = cj.jit(SCALE)
    before = cj._C.nvrtc_compile_count()
    compiled = k.precompile(meta_specs(), arch="sm_90", workers=1, progress=False)
    assert cj._C.nvrtc_compile_count() - before == 1
    assert len({c.cubin for c in compiled}) == 1
    assert [c.signature.split(",")[0] for c in compiled] == [
        "(Array<float32", "(Array<float64", "(Array<float16"]


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_precompile_batch_with_a_failure_compiles_the_rest_alone(cache_dir, processes):
    k = cj.jit(SCALE)
    good = meta_specs((torch.float32, torch.float64))
    bad = (torch.empty(8, device="meta"), torch.empty(8, dtype=torch.float64, device="meta"), 1.0)
    with pytest.raises(cj.CompileError, match="could not be instantiated"):
        # Batches [good, bad] and [good]: the first fails as a whole, then compiles alone.
        k.precompile([good[0], bad, good[1]], arch="sm_90", workers=2, processes=processes,
                     progress=False)
    assert len(k.signatures) == 2


def test_precompile_workers_persist_and_follow_the_settings(cache_dir, tmp_path):
    from torch_cudajit import _precompile
    specs = [(torch.empty(4, dtype=d, device="meta"), torch.empty(4, dtype=d, device="meta"), 2.0)
             for d in (torch.float32, torch.float64)]
    cj.jit(SCALE).precompile(specs, arch="sm_90", workers=2, processes=True, progress=False)
    pool = _precompile._POOL
    assert pool is not None and len(entries(cache_dir)) == 2
    # A new cache folder: the same (already forked) workers write there.
    other = tmp_path / "other"
    cj.cache.configure(dir=other)
    k = cj.jit(SCALE)
    k.precompile(specs, arch="sm_90", workers=2, processes=True, progress=False)
    assert _precompile._POOL is pool
    assert len(entries(other)) == 2 and (k.cache_hits, k.cache_misses) == (0, 2)


def test_precompile_progress_bar(cache_dir, capsys):
    k = cj.jit(SCALE)
    specs = [(torch.empty(n, device="meta"), torch.empty(n, device="meta"), 1.0) for n in (1, 2)]
    k.precompile(specs, arch="sm_90", workers=2, progress=True)
    err = capsys.readouterr().err
    assert "torch_cudajit: compiling scale [" in err and "2/2" in err


def test_precompile_rejects_bad_specs():
    k = cj.jit(SCALE)
    with pytest.raises(TypeError, match="specs must be a list"):
        k.precompile("float32")
    with pytest.raises(TypeError, match=r"specs\[1\] must be a tuple"):
        k.precompile([(torch.empty(1), torch.empty(1), 1.0), 5], arch="sm_90")
    with pytest.raises(ValueError, match="workers must be a positive int, got 0"):
        k.precompile([], workers=0, arch="sm_90")


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_precompile_reports_the_first_failure_after_compiling_the_rest(cache_dir, processes):
    k = cj.jit(SCALE)
    good = (torch.empty(8, device="meta"), torch.empty(8, device="meta"), 1.0)
    bad = (torch.empty(8, device="meta"), torch.empty(8, dtype=torch.float64, device="meta"), 1.0)
    with pytest.raises(cj.CompileError):
        k.precompile([bad, good], arch="sm_90", workers=2, processes=processes, progress=False)
    assert len(k.signatures) == 1


def test_cli_version_and_info(tmp_path):
    def cli(*args, env=None, check=True):
        return run_python("import sys, runpy; sys.argv = ['torch_cudajit'] + %r\n"
                          "runpy.run_module('torch_cudajit', run_name='__main__')" % list(args),
                          tmp_path / "cache", extra_env=env, check=check)

    assert cli("--version").stdout.strip() == f"torch_cudajit {cj.__version__}"
    out = cli("info").stdout
    for row in ("torch_cudajit:", "torch:", "NVRTC:", "libclang:", "headers:", "CUDA headers:",
                "CCCL:", "driver:", "cache:"):
        assert row in out, out
    assert f"{tmp_path / 'cache'} (usable)" in out
    assert "clang version" in out
    (tmp_path / "file").write_text("not a folder")
    out = cli("info", env={"TORCH_CUDAJIT_CACHE_DIR": str(tmp_path / "file")}).stdout
    assert f"{tmp_path / 'file'} (not usable: torch_cudajit cache: cannot create the cache folder" in out
    assert "(Not a directory)" in out
    r = cli(check=False)
    assert r.returncode == 2 and "a command is required: info or cache" in r.stderr


@pytest.mark.parametrize("kind", ["file", "world-writable"])
def test_cli_cache_info_says_why_the_folder_is_not_usable(tmp_path, kind):
    """`cache info` reports the check the cache makes of its folder, not only the setting."""
    folder = tmp_path / "cache"
    if kind == "file":
        folder.write_text("not a folder")
        reason = r"cannot create the cache folder .*\(Not a directory\)"
    else:
        folder.mkdir()
        os.chmod(folder, 0o777)
        reason = r"can be written by other users \(mode 0777\)"

    def cache_info(cache_folder, env=None):
        return run_python("import sys, runpy; sys.argv = ['torch_cudajit', 'cache', 'info']\n"
                          "runpy.run_module('torch_cudajit', run_name='__main__')", cache_folder,
                          extra_env=env).stdout

    out = cache_info(folder)
    assert "enabled:   yes" in out
    assert re.search(r"usable:    no: torch_cudajit cache: .*" + reason, out), out
    assert "usable:    yes" in cache_info(tmp_path / "new")
    off = cache_info(folder, {"TORCH_CUDAJIT_CACHE": "0"})
    assert "enabled:   no (TORCH_CUDAJIT_CACHE=0)" in off and "usable:" not in off
