"""Scaling across a cluster: the wall time for N ranks to get K specializations ready, with the
job's store (torch_cudajit.distributed: each specialization compiled once in the job) against
each rank compiling for itself (TORCH_CUDAJIT_STORE=0), on one machine.

Each rank is a process of `torch.distributed.run` (gloo), with a cache folder of its own (the
case of nodes that share no disk), compiling for sm_90 (no GPU needed). A rank's time runs from a
barrier after the process group is up to its last specialization ready; the job's time is the
slowest rank's. The store's cost per request (add, wait, get of a record of the size these
kernels make) is measured against a TCPStore in this process, and projected to 1,000 ranks.

Floor: one compile of each specialization, by one rank (N = 1). Target: with the store, the
job's time stays near the floor as N grows; each rank compiling for itself grows with N on a
machine whose cores the ranks share (across nodes, each node compiles every specialization:
CPU time spent N times over, and the job waits for its slowest node).

Run: python benchmarks/cluster.py [--ranks 1,8,32,64] [--markdown] [--plot cluster.png]"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SOURCES = {
    "scale": r"""
template <typename T>
__global__ void scale(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}""",
    "axpy": r"""
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i] + y[i];
}""",
}
DTYPES = ("float32", "float64", "float16", "bfloat16")
K = len(SOURCES) * len(DTYPES)


def worker(out: str) -> None:
    """One rank: its own cache folder, the process group, then the K specializations."""
    rank = int(os.environ["RANK"])
    os.environ["TORCH_CUDAJIT_CACHE_DIR"] = os.path.join(out, f"cache-{rank}")
    import torch
    import torch.distributed as dist

    import torch_cudajit as cj
    import torch_cudajit.distributed as cjd

    dist.init_process_group("gloo")
    kernels = {name: cj.jit(src) for name, src in SOURCES.items()}
    work = [(name, d) for name in SOURCES for d in DTYPES]
    work = work[rank % K:] + work[:rank % K]  # the compiling ranks spread over the job
    dist.barrier()
    start = time.perf_counter()
    for name, d in work:
        x = torch.empty(8, dtype=getattr(torch, d), device="meta")
        args = (x, x, 2.0) if name == "scale" else (x, x, x, 2.0)
        kernels[name].compile(*args, arch="sm_90")
    ready = time.perf_counter() - start
    with open(os.path.join(out, f"{rank}.json"), "w") as f:
        json.dump(dict(ready=ready, **cjd.stats()), f)
    dist.barrier()
    dist.destroy_process_group()


def run_job(n: int, store: bool) -> dict:
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1", TORCH_CUDAJIT_STORE="1" if store else "0")
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc-per-node={n}", os.path.abspath(__file__), "--worker", out],
                           env=env, capture_output=True, text=True, timeout=900)
        total = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-4000:])
        ranks = [json.load(open(os.path.join(out, f"{i}.json"))) for i in range(n)]
    return dict(ready=max(x["ready"] for x in ranks), total=total,
                compiled=sum(x["compiled"] for x in ranks),
                received=sum(x["received"] for x in ranks))


def store_latency(record_bytes: int, n: int = 2000) -> dict:
    """Median seconds of one add (the claim), one wait + get of a published record, over TCP on
    this machine."""
    import torch.distributed as dist
    from datetime import timedelta

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=30))
    record = os.urandom(record_bytes)
    client.set("record", record)
    adds, gets = [], []
    for i in range(n):
        t = time.perf_counter()
        client.add(f"claim{i}", 1)
        adds.append(time.perf_counter() - t)
        t = time.perf_counter()
        client.wait(["record"], timedelta(seconds=5))
        client.get("record")
        gets.append(time.perf_counter() - t)
    return dict(add=statistics.median(adds), get=statistics.median(gets))


def record_size() -> int:
    """Bytes of one published record of these kernels (framed, as the store holds it)."""
    import torch
    import torch_cudajit as cj

    x = torch.empty(8, device="meta")
    with tempfile.TemporaryDirectory() as d:
        cj.cache.configure(dir=d)
        cj.jit(SOURCES["axpy"]).compile(x, x, x, 2.0, arch="sm_90")
        return max(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(d)
                   for f in files if f.endswith(".cj"))


def rank_memory_bytes() -> int:
    """Private memory of one rank after import (an estimate for how many ranks fit: the
    libraries' pages are shared between the ranks)."""
    code = ("import torch, torch.distributed, torch_cudajit\n"
            "rollup = dict(l.split(':', 1) for l in open('/proc/self/smaps_rollup') if ':' in l)\n"
            "print(sum(int(rollup[k].split()[0]) * 1024 for k in ('Private_Clean', 'Private_Dirty')))")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True).stdout)


def available_bytes() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker")
    p.add_argument("--ranks", default="1,8,32,64")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--plot", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster.png"))
    a = p.parse_args()
    if a.worker:
        worker(a.worker)
        return

    per_rank = rank_memory_bytes()
    free = available_bytes()
    rows = []
    for n in (int(x) for x in a.ranks.split(",")):
        # Ranks plus the agent, with a quarter kept free for the compiles and the system.
        if n * per_rank > 0.75 * free:
            print(f"N = {n}: skipped, {n} ranks of {per_rank / 2**20:.0f} MiB need more than "
                  f"3/4 of the {free / 2**30:.1f} GiB available", flush=True)
            continue
        with_store = run_job(n, True)
        alone = run_job(n, False)
        rows.append((n, with_store, alone))
        print(f"N = {n}: store {with_store['ready']:.1f} s ({with_store['compiled']} compiles), "
              f"each rank {alone['ready']:.1f} s ({alone['compiled']} compiles)", flush=True)

    size = record_size()
    lat = store_latency(size)
    print()
    print(f"K = {K} specializations; one rank's folder each; times are the slowest rank's, from "
          "a barrier to its last specialization ready (torchrun's whole run in brackets).")
    print()
    print("| ranks N | with the store: s | compiles in the job | each rank compiles: s "
          "| compiles in the job | speed-up |")
    print("|---|---|---|---|---|---|")
    for n, s, e in rows:
        print(f"| {n} | {s['ready']:.2f} ({s['total']:.0f}) | {s['compiled']} | "
              f"{e['ready']:.2f} ({e['total']:.0f}) | {e['compiled']} | {e['ready'] / s['ready']:.1f}x |")
    print()
    per_request = lat["add"] + lat["get"]
    print(f"Store latency (TCPStore on this machine, record of {size / 1024:.1f} KiB): add "
          f"{lat['add'] * 1e6:.0f} us, wait + get {lat['get'] * 1e6:.0f} us; "
          f"{per_request * 1e6:.0f} us per rank and specialization.")
    # The TCPStore server answers one request at a time: at 1,000 ranks every specialization
    # costs the server 1,000 claims and 1,000 reads (heartbeat reads come every two heartbeats
    # of a waiting rank, and add little next to them).
    ranks = 1000
    serial = ranks * per_request
    print(f"Projection to {ranks} ranks: the server answers {ranks} claims and {ranks} reads per "
          f"specialization, about {serial:.2f} s of server time each ({serial * K:.1f} s for "
          f"K = {K}) if no two are served at once, moving {ranks * size / 2**20:.0f} MiB per "
          "specialization; against each rank spending one compile per specialization.")

    if rows:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("\n(matplotlib is not installed: no plot)")
            return
        fig, ax = plt.subplots(figsize=(6, 4))
        ns = [n for n, _, _ in rows]
        ax.plot(ns, [s["ready"] for _, s, _ in rows], "o-", label="with the store")
        ax.plot(ns, [e["ready"] for _, _, e in rows], "s-", label="each rank compiles")
        ax.set_xlabel("ranks")
        ax.set_ylabel(f"seconds until {K} specializations are ready")
        ax.set_xscale("log", base=2)
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)
        print(f"\nplot: {a.plot}")


if __name__ == "__main__":
    main()
