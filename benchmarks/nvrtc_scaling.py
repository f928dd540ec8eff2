"""How NVRTC compiles scale with threads and with processes on this machine, without
torch_cudajit: 32 compiles of a small templated kernel through the NVRTC C API (ctypes).
This decides how Kernel.precompile parallelizes.

Run: python benchmarks/nvrtc_scaling.py"""
import ctypes
import glob
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

SRC = r"""
template <typename T, int N>
__global__ void k(T* out, const T* x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  T acc = 0;
  #pragma unroll
  for (int j = 0; j < N; ++j) acc += x[(i + j) % n] * (T)(j + 1);
  if (i < n) out[i] = acc;
}
"""
TYPES = ["float", "double", "int", "long long", "short", "unsigned", "char", "unsigned char"]


def find_nvrtc():
    pats = [os.path.join(p, "nvidia", "cu13", "lib", "libnvrtc.so*") for p in sys.path]
    pats += ["/usr/local/cuda/lib64/libnvrtc.so*"]
    for pat in pats:
        for f in sorted(glob.glob(pat)):
            if "builtins" not in f and "alt" not in f:
                return f
    raise SystemExit("no libnvrtc found")


LIB = None


def compile_one(i):
    global LIB
    if LIB is None:
        LIB = ctypes.CDLL(find_nvrtc())
    t, n = TYPES[i % len(TYPES)], 1 + i // len(TYPES)
    name = f"k<{t}, {n}>"
    prog = ctypes.c_void_p()
    src = SRC + f"\n// {i} {os.getpid()}\n"
    assert LIB.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    LIB.nvrtcAddNameExpression(prog, name.encode())
    opts = [b"-arch=sm_90", b"-std=c++17"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    r = LIB.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    LIB.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    LIB.nvrtcDestroyProgram(ctypes.byref(prog))
    return r, size.value


def run_threads(n_threads, items):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n_threads) as ex:
        res = list(ex.map(compile_one, items))
    assert all(r == 0 for r, _ in res), res
    return time.perf_counter() - t0


def run_processes(n_procs, items):
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(n_procs) as pool:
        res = pool.map(compile_one, items)
    assert all(r == 0 for r, _ in res), res
    return time.perf_counter() - t0


def main():
    items = list(range(32))
    compile_one(999)  # load NVRTC
    print(f"# NVRTC scaling, 32 compiles, {os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}")
    try:
        print("cgroup cpu.max:", open("/sys/fs/cgroup/cpu.max").read().strip())
    except OSError:
        pass
    base = run_threads(1, items)
    print(f"| workers | threads s | speed-up | processes (fork) s | speed-up |\n|---|---|---|---|---|")
    print(f"| 1 | {base:.2f} | 1.00x | - | - |")
    for n in (2, 4, 8, 16):
        t = run_threads(n, items)
        p = run_processes(n, items)
        print(f"| {n} | {t:.2f} | {base / t:.2f}x | {p:.2f} | {base / p:.2f}x |")


if __name__ == "__main__":
    main()
