"""Whole CUDA files: what loading a real .cu file costs, against nvcc compiling the same file.

For llm.c's dev/cuda files (tests/corpus_files/llm.c, unedited), per file:
  device pass  cj.device_source: the Clang front end reads the whole file and its headers and
               keeps the device side (what `cj.load` adds to a string source);
  cj cold      cj.load, then every kernel of the file compiled for sm_90 from example arguments,
               with the disk cache off (each kernel is its own NVRTC program, as at first launch);
  nvcc         `nvcc -cubin -arch=sm_90 file.cu`: nvcc's device pass alone, every kernel of the
               file in one compile (the floor for compiling the same device code ahead of time).
Medians of --repeats runs after one warm-up run; no GPU needed (compiles only).

Floor and prediction: the device pass is one Clang parse of the file with bodies (tens of ms to
a few hundred for files that include CCCL's cooperative groups); cj cold is the sum of one NVRTC
compile per kernel, each about a small kernel's bare NVRTC cost, so a file of K kernels costs
about K times that, against nvcc's one compile of all K: the ratio grows with K, and a launch
pays only for the kernels it uses.

Run: python benchmarks/whole_file.py [--files gelu_forward,layernorm_forward] [--repeats 3]
                                      [--markdown]"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

DEFAULT_FILES = ("gelu_forward", "residual_forward", "softmax_forward", "layernorm_forward",
                 "attention_forward", "matmul_backward_bias")


def timed(fn, repeats: int) -> float:
    """Median seconds of `repeats` runs of fn after one warm-up run."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default=",".join(DEFAULT_FILES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    os.environ["TORCH_CUDAJIT_CACHE"] = "0"  # every compile is cold
    import torch_cudajit as cj
    import test_file_corpus as corpus

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    rows = []
    for stem in a.files.split(","):
        path = str(corpus.source_path(stem))

        def device_pass():
            cj.device_source(path)

        def cold():
            loaded = cj.load(path, cache=False)
            for name, kernel in corpus.kernels_of(loaded).items():
                t = corpus.TEMPLATES.get(corpus.case_id(stem, name))
                if t is not None and t.template_args is not None:
                    kernel = cj.load(path, name=name, template_args=t.template_args, cache=False)
                kernel.compile(*corpus.example_args(stem, kernel), arch="sm_90")

        def with_nvcc():
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O3", path, "-o",
                                os.path.join(tmp, "out.cubin")], check=True,
                               capture_output=True)

        kernels = len(corpus.kernels_of(cj.load(path, cache=False)))
        dp = timed(device_pass, a.repeats)
        c = timed(cold, a.repeats)
        n = timed(with_nvcc, a.repeats) if os.path.exists(nvcc) else float("nan")
        rows.append((stem, kernels, dp * 1e3, c * 1e3, c / kernels * 1e3, n * 1e3, c / n))
        print(f"{stem}: {kernels} kernels, device pass {dp * 1e3:.0f} ms, cj cold {c * 1e3:.0f} ms, "
              f"nvcc {n * 1e3:.0f} ms", file=sys.stderr)
    head = ("| file | kernels | device pass (ms) | cj cold, all kernels (ms) | cj per kernel (ms) "
            "| nvcc -cubin (ms) | cj cold / nvcc |")
    print(head)
    print("|---|---|---|---|---|---|---|")
    for stem, k, dp, c, per, n, ratio in rows:
        print(f"| {stem} | {k} | {dp:.0f} | {c:.0f} | {per:.0f} | {n:.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
