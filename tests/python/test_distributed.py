"""One compile per specialization across a job (torch_cudajit.distributed): ranks started by
torchrun (gloo, no GPU) with a cache folder each, as on nodes that share no disk; two simulated
nodes; a compiling rank killed mid-compile; a store that fails or goes away; a Python subclass
of torch.distributed.Store. Compiles to CUBIN for sm_90 (tests/python/_job_worker.py), so no
GPU is needed except for the two-GPU launch test."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import torch_cudajit as cj
import torch_cudajit.distributed as cjd
from _support import SCALE

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "_job_worker.py")
DTYPES = "float32,float64,float16,bfloat16"


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TORCH_CUDAJIT_CACHE_DIR", None)
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(out, n, *worker_args, timeout=240):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           WORKER, str(out), *worker_args]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return [json.loads((out / f"{rank}.json").read_text()) for rank in range(n)]


def _totals(results):
    return {k: sum(r["stats"][k] for r in results)
            for k in ("compiled", "received", "timeouts", "rejected", "store_errors")}


def _same_code(results):
    """Every rank got the very same CUBIN for each dtype."""
    for dtype in results[0]["cubins"]:
        assert len({r["cubins"][dtype] for r in results}) == 1, dtype


def test_32_ranks_without_a_shared_disk_compile_each_key_once(tmp_path):
    """32 ranks, a cache folder each, the default process group's store (found by itself):
    the job compiles each of the 4 specializations once; every other rank receives it."""
    results = _torchrun(tmp_path, 32, DTYPES)
    keys = len(DTYPES.split(","))
    totals = _totals(results)
    assert totals["compiled"] == keys, totals
    assert totals["received"] == keys * 31, totals
    assert totals["timeouts"] == totals["rejected"] == totals["store_errors"] == 0
    assert all(r["stats"]["store"] == "auto" for r in results)
    _same_code(results)


def test_two_nodes_compile_once_and_receive_once(tmp_path):
    """Two simulated nodes of 4 ranks (a folder per node): within a node the file lock makes
    the ranks after the first find the record on disk; across nodes the store does."""
    results = _torchrun(tmp_path, 8, DTYPES, "--node-size", "4")
    keys = len(DTYPES.split(","))
    totals = _totals(results)
    assert totals["compiled"] == keys, totals
    assert totals["received"] == keys, totals  # once by the other node
    assert sum(r["hits"] for r in results) == keys * 6
    _same_code(results)


class _Job:
    """Ranks started one by one against a TCPStore whose server runs in a process of its own
    (so that it can be killed), each with a cache folder of its own."""

    def __init__(self, out):
        self.out, self.port, self.procs = out, _free_port(), []
        self.server = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time, torch.distributed as d\n"
             f"s = d.TCPStore('127.0.0.1', {self.port}, is_master=True, wait_for_workers=False)\n"
             "print('up', flush=True); time.sleep(3600)"],
            env=_env(), stdout=subprocess.PIPE, text=True)
        assert self.server.stdout.readline().strip() == "up"
        self.store = dist.TCPStore("127.0.0.1", self.port, is_master=False,
                                   timeout=timedelta(seconds=30))

    def rank(self, rank, dtypes, **env):
        p = subprocess.Popen(
            [sys.executable, WORKER, str(self.out), dtypes, "--rank", str(rank),
             "--store", f"127.0.0.1:{self.port}"],
            env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def wait_for_claim(self, keys_before, timeout=120):
        deadline = time.monotonic() + timeout
        while self.store.num_keys() <= keys_before:
            assert time.monotonic() < deadline, "no rank claimed the compile"
            time.sleep(0.1)

    @staticmethod
    def asking(procs):
        """Returns once each rank is about to ask for its kernel, and a little more."""
        for p in procs:
            while not p.stdout.readline().startswith("asking"):
                assert p.poll() is None, p.stderr.read()[-3000:]
        time.sleep(3)

    def result(self, p, rank, timeout=240):
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-6000:]
        return json.loads((self.out / f"{rank}.json").read_text()), err

    def close(self):
        for p in self.procs + [self.server]:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_killed_compiling_rank_lets_the_others_compile(tmp_path, cache_dir):
    """The compiling rank is killed (SIGKILL) mid-compile: its heartbeat stops, so the waiting
    ranks compile for themselves well before the timeout, and get the right code."""
    job = _Job(tmp_path)
    try:
        before = job.store.num_keys()
        winner = job.rank(0, "float32", TORCH_CUDAJIT_STORE_TEST_DELAY="600")
        job.wait_for_claim(before)
        waiters = [job.rank(r, "float32", JOB_TEST_STALE="3") for r in (1, 2, 3)]
        job.asking(waiters)
        os.kill(winner.pid, signal.SIGKILL)
        start = time.monotonic()
        results = []
        for r, p in zip((1, 2, 3), waiters):
            result, err = job.result(p, r)
            assert "no sign of life" in err, err[-3000:]
            results.append(result)
        assert time.monotonic() - start < 90  # the timeout (120 s) was not waited out
        for r in results:
            assert (r["stats"]["compiled"], r["stats"]["timeouts"], r["stats"]["received"]) == (1, 1, 0)
        # Nothing half-made was served: the code is what a rank alone compiles.
        x = torch.empty(8, device="meta")
        alone = hashlib.sha256(cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90").cubin).hexdigest()
        assert {r["cubins"]["torch.float32"] for r in results} == {alone}
    finally:
        job.close()


def test_store_server_killed_while_waiting(tmp_path):
    """The store's server goes away while ranks wait for a compile: they compile for
    themselves, with one warning, and count the store error."""
    job = _Job(tmp_path)
    try:
        before = job.store.num_keys()
        winner = job.rank(0, "float64", TORCH_CUDAJIT_STORE_TEST_DELAY="600")
        job.wait_for_claim(before)
        waiters = [job.rank(r, "float64") for r in (1, 2)]
        job.asking(waiters)
        job.server.kill()
        job.server.wait()
        for r, p in zip((1, 2), waiters):
            result, err = job.result(p, r)
            assert result["stats"]["compiled"] == 1 and result["stats"]["store_errors"] >= 1
            assert err.count("torch_cudajit job store: the store failed") == 1, err[-3000:]
        winner.kill()
    finally:
        job.close()


class _DictStore(dist.Store):
    """A store written in Python; `broken` makes every call fail, as a lost connection does."""

    def __init__(self, broken=False):
        super().__init__()
        self.data, self.broken = {}, broken

    def _check(self):
        if self.broken:
            raise ConnectionResetError("connection reset by peer")

    def set(self, key, value):
        self._check()
        self.data[key] = value if isinstance(value, bytes) else value.encode()

    def get(self, key):
        self._check()
        return self.data[key]

    def add(self, key, amount):
        self._check()
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value

    def check(self, keys):
        self._check()
        return all(k in self.data for k in keys)

    def wait(self, keys, timeout=None):
        self._check()
        if not self.check(keys):
            raise TimeoutError(f"keys {keys} not set")


@pytest.fixture
def store_reset():
    yield
    cjd.use_store("auto")


def test_python_store_subclass_publishes_and_serves(cache_dir, tmp_path, store_reset):
    """A Python subclass of torch.distributed.Store works as the store: the first compile is
    published; after the disk cache is emptied (another node), the record comes from it."""
    store = _DictStore()
    cjd.use_store(store, timeout=5)
    x = torch.empty(8, device="meta")
    first = cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90")
    assert any(k.endswith("/result") for k in store.data)
    before = cjd.stats()
    cj.cache.configure(dir=tmp_path / "other-node")
    compiles = cj._C.nvrtc_compile_count()
    second = cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90")
    assert cj._C.nvrtc_compile_count() == compiles
    assert cjd.stats()["received"] == before["received"] + 1
    assert second.cubin == first.cubin


def _compile_in_fork(store, folder, queue):
    cj.cache.configure(dir=folder)
    x = torch.empty(8, dtype=torch.float16, device="meta")
    cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90")
    queue.put((len(store.data), cjd.stats()["compiled"]))


def test_forked_child_compiles_without_the_parents_store(cache_dir, tmp_path, store_reset):
    """precompile's forked workers must not talk over the parent's store connection."""
    import multiprocessing

    store = _DictStore()
    cjd.use_store(store)
    x = torch.empty(8, device="meta")
    cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90")
    keys, compiled = len(store.data), cjd.stats()["compiled"]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_compile_in_fork, args=(store, tmp_path / "child", queue))
    child.start()
    assert queue.get(timeout=120) == (keys, compiled + 1)  # compiled, the store untouched
    child.join()


def test_failing_store_compiles_here_with_one_warning(cache_dir, store_reset):
    cjd.use_store(_DictStore(broken=True))
    before = cjd.stats()["store_errors"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for dtype in (torch.float32, torch.float64):
            x = torch.empty(8, dtype=dtype, device="meta")
            assert cj.jit(SCALE).compile(x, x, 2.0, arch="sm_90").cubin
    assert cjd.stats()["store_errors"] == before + 2
    assert sum("the store failed" in str(w.message) for w in caught) == 1


def test_use_store_checks_its_arguments(store_reset):
    with pytest.raises(TypeError, match="takes a torch.distributed.Store"):
        cjd.use_store(object())
    with pytest.raises(ValueError, match="'auto'"):
        cjd.use_store("tcp://host")
    with pytest.raises(ValueError, match="timeout is -1"):
        cjd.use_store(None, timeout=-1)
    cjd.use_store(None, timeout=7)
    assert cjd.stats()["store"] is None and cjd.stats()["timeout"] == 7


def test_default_store_only_when_a_group_is_initialised(monkeypatch, store_reset):
    from torch_cudajit.distributed import _default_store

    assert not dist.is_initialized() and _default_store() is None
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist.distributed_c10d, "_get_default_store", lambda: "the store")
    assert _default_store() == "the store"
    monkeypatch.setenv("TORCH_CUDAJIT_STORE", "0")
    assert _default_store() is None


@pytest.mark.gpu
def test_two_gpus_launch_after_one_compile(tmp_path, two_gpus):
    """Two ranks on nccl, one GPU each: each launches the kernel and checks it against torch;
    the job compiled each specialization once."""
    results = _torchrun(tmp_path, 2, "float32,float64", "--gpu")
    assert all(r["checked"] == 2 for r in results)
    assert _totals(results)["compiled"] == 2


@pytest.mark.gpu
def test_ranks_sharing_a_gpu_launch_what_they_received(tmp_path, device):
    """Two ranks on one GPU (gloo), a cache folder each: the code one rank received from the
    other loads and computes what torch computes."""
    results = _torchrun(tmp_path, 2, "float32,float64", "--gpu")
    assert all(r["checked"] == 2 for r in results)
    assert _totals(results)["compiled"] == 2 and _totals(results)["received"] == 2
