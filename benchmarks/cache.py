"""Kernel cache: what the persistent cache costs and saves, in one run.

1. Cold compile: torch_cudajit's compile on a miss (key, NVRTC, store) against bare NVRTC
   (ctypes) on the same generated source, options and name expressions.
   Floor: bare NVRTC itself. Target: overhead <= 10%. Prediction: 1-3% (the key hashes a few
   KB and the store writes one file of ~10-30 KB; NVRTC takes 50-200 ms).
2. Warm process: a new process with a populated cache, from kernel creation to the end of the
   first launch (synchronized). Target: <= 2 ms. Prediction: ~0.5 ms (reflect, hash, read the
   file, cuLibraryLoadData, launch; NVRTC is never loaded). Peers: CuPy RawKernel with its own
   disk cache, and torch.cuda._compile_kernel, which has none.
3. In-process hit: launch cost with the disk cache on and off (the hot path never looks at it).
4. Parallel precompile of 32 specializations, 8 workers against 1. Target: >= 5x.
   Prediction: ~6x with worker processes; threads stop scaling near 3x (nvrtc_scaling.py).

5. Compile latency against the user's own source: bare NVRTC compiling the kernel as written
   (no deduction code, no probes, no cj/cj.cuh), with the same options, against a cold compile
   of one specialization; and a template with three dtypes (fp32, fp16, bf16) asked together
   (precompile: one NVRTC program), one by one, by bare NVRTC in one program, and by CuPy's
   RawModule (where CuPy and a GPU are present). Floor: bare NVRTC on the user's source.
   Targets: one specialization <= 1.15x; three together no slower than bare NVRTC + 15%.
   Prediction: the generated deduction helper and one probe per parameter add a few
   instantiations to a compile dominated by parsing the headers: ~1.1x for one key; three keys
   in one program ~1.1x of bare NVRTC's one program, and ~0.5x of three separate compiles.

Run: python benchmarks/cache.py [--markdown] [--skip-gpu]"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import torch

# One-block launches are what these benchmarks measure, not a mistake to warn about.
os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")

sys.path.insert(0, os.path.dirname(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch_cudajit as cj  # noqa: E402

# A kernel of realistic size: a templated row softmax over a strided 2-D array.
SOFTMAX = r"""
template <typename T>
__global__ void softmax_rows(cj::Array<T, 2> out, cj::Array<const T, 2> x) {
  extern __shared__ float scratch[];
  long long row = blockIdx.x;
  if (row >= x.size(0)) return;
  float m = -1e30f;
  for (long long j = threadIdx.x; j < x.size(1); j += blockDim.x) m = fmaxf(m, (float)x(row, j));
  scratch[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  m = scratch[0];
  __syncthreads();
  float sum = 0.f;
  for (long long j = threadIdx.x; j < x.size(1); j += blockDim.x) sum += __expf((float)x(row, j) - m);
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  sum = scratch[0];
  for (long long j = threadIdx.x; j < x.size(1); j += blockDim.x)
    out(row, j) = (T)(__expf((float)x(row, j) - m) / sum);
}
"""

AXPY = r"""
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i];
}
"""

# A template written for nvcc: three dtypes of it are asked together (compile latency, 5).
AXPY3 = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename T>
__global__ void axpy3(T* out, const T* x, const T* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = T(a * float(x[i]) + float(y[i]));
}
"""
AXPY3_TYPES = ((torch.float32, "float"), (torch.float16, "__half"), (torch.bfloat16, "__nv_bfloat16"))

COPY = r"""
template <typename T, int N>
__global__ void copy_first(cj::Array<T, N> out, cj::Array<const T, N> x) {
  if (threadIdx.x == 0 && x.numel() > 0) out.data()[0] = x.data()[0];
}
"""


def nvrtc_library():
    """The NVRTC library torch_cudajit loaded (it is loaded after the first compile)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libnvrtc.so" in path and "builtins" not in path:
                return ctypes.CDLL(path)
    raise RuntimeError("NVRTC is not loaded")


def bare_nvrtc_compile(nvrtc, source: str, filename: str, options, names):
    """One compile through the NVRTC C API, fetching what torch_cudajit fetches."""
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), filename.encode(), 0, None, None) == 0
    for n in names:
        assert nvrtc.nvrtcAddNameExpression(prog, n.encode()) == 0
    argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    assert nvrtc.nvrtcCompileProgram(prog, len(options), argv) == 0
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    nvrtc.nvrtcGetProgramLog(prog, ctypes.create_string_buffer(size.value))
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    nvrtc.nvrtcGetPTX(prog, ctypes.create_string_buffer(size.value))
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    for n in names:
        lowered = ctypes.c_char_p()
        nvrtc.nvrtcGetLoweredName(prog, n.encode(), ctypes.byref(lowered))
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw


def user_source_options(options):
    """Our NVRTC options for a compile of the user's source as written: the same target,
    standard and include folders, without the plugin's own macros."""
    return [o for o in options if not o.startswith("-DCJ_")]


def against_user_source(repeats=15):
    """Medians (ms): bare NVRTC on the user's softmax as written (one explicit instantiation);
    a cold compile of the same specialization from the source text (the front end reading the
    declarations, key, NVRTC, store); and the compile alone, of a kernel already defined (the
    front end runs once per kernel, whatever the number of specializations)."""
    x = torch.empty(64, 1000, device="meta")
    bare, ours, compile_only = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        cj.cache.configure(dir=folder, enabled=True)
        warm = cj.jit(SOFTMAX)
        options = user_source_options(warm._core.compile_inputs((x, x), 90)["options"])
        warm.compile(x, x, arch=90)
        nvrtc = nvrtc_library()
        # The user's source needs cj::Array's definition, which cj/cj.cuh gives.
        for i in range(repeats):
            src = "#include <cj/cj.cuh>\n" + SOFTMAX + f"\n// variant {i}\n"
            t0 = time.perf_counter()
            bare_nvrtc_compile(nvrtc, src, "kernel.cu", options, ["softmax_rows<float>"])
            t1 = time.perf_counter()
            k = cj.jit(SOFTMAX + f"\n// ours {i}\n")
            k.compile(x, x, arch=90)
            t2 = time.perf_counter()
            defined = cj.jit(SOFTMAX + f"\n// defined {i}\n")
            t3 = time.perf_counter()
            defined.compile(x, x, arch=90)
            t4 = time.perf_counter()
            assert k.cache_misses == 1 and defined.cache_misses == 1
            bare.append((t1 - t0) * 1e3)
            ours.append((t2 - t1) * 1e3)
            compile_only.append((t4 - t3) * 1e3)
        cj.cache.reset()
    return statistics.median(bare), statistics.median(ours), statistics.median(compile_only)


def three_dtypes(repeats=9):
    """Medians (ms) of compiling AXPY3 for three dtypes: bare NVRTC (one program, the user's
    source), ours asked together (precompile, one worker: one program), ours one by one, and
    CuPy's RawModule (None without CuPy and a GPU)."""
    n = 1 << 10
    specs = [(torch.empty(n, dtype=d, device="meta"),) * 3 + (2.0, n) for d, _ in AXPY3_TYPES]
    names = [f"axpy3<{t}>" for _, t in AXPY3_TYPES]
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CuPy, or no GPU: the row is left out
        cupy = None
    rows = {"bare": [], "together": [], "one by one": [], "cupy": []}
    with tempfile.TemporaryDirectory() as folder:
        cj.cache.configure(dir=folder, enabled=True)
        warm = cj.jit(AXPY3)
        options = user_source_options(warm._core.compile_inputs(specs[0], 90)["options"])
        warm.compile(*specs[0], arch=90)
        nvrtc = nvrtc_library()
        for i in range(repeats):
            t0 = time.perf_counter()
            bare_nvrtc_compile(nvrtc, AXPY3 + f"// bare {i}\n", "kernel.cu", options, names)
            t1 = time.perf_counter()
            cj.jit(AXPY3 + f"// together {i}\n").precompile(specs, arch=90, workers=1,
                                                              progress=False)
            t2 = time.perf_counter()
            k = cj.jit(AXPY3 + f"// one by one {i}\n")
            for spec in specs:
                k.compile(*spec, arch=90)
            t3 = time.perf_counter()
            rows["bare"].append((t1 - t0) * 1e3)
            rows["together"].append((t2 - t1) * 1e3)
            rows["one by one"].append((t3 - t2) * 1e3)
            if cupy is not None:
                t4 = time.perf_counter()
                # A text no earlier run compiled: CuPy keeps compiled modules on disk.
                fresh = f"// cupy {os.getpid()} {time.time_ns()} {i}\n"
                m = cupy.RawModule(code=AXPY3 + fresh, options=("-std=c++17",), name_expressions=names)
                for name in names:
                    m.get_function(name)
                rows["cupy"].append((time.perf_counter() - t4) * 1e3)
        cj.cache.reset()
    return {k: (statistics.median(v) if v else None) for k, v in rows.items()}


def print_compile_latency():
    bare, ours, compile_only = against_user_source()
    print("\n| one specialization (softmax_rows, sm_90) | ms (median of 15) | vs bare NVRTC |")
    print("|---|---|---|")
    print(f"| bare NVRTC, the user's source as written (softmax_rows<float>) | {bare:.1f} | 1.00x |")
    print(f"| torch_cudajit cold: cj.jit + compile on a cache miss | {ours:.1f} | {ours / bare:.3f}x |")
    print(f"| torch_cudajit, compile on a cache miss of a kernel already defined | {compile_only:.1f} | "
          f"{compile_only / bare:.3f}x |")
    r = three_dtypes()
    print("\n| template x 3 dtypes (fp32, fp16, bf16; cuda_fp16/bf16 headers) | ms (median of 9) | vs bare NVRTC |")
    print("|---|---|---|")
    print(f"| bare NVRTC, one program with three name expressions | {r['bare']:.1f} | 1.00x |")
    print(f"| torch_cudajit, asked together (precompile: one NVRTC program) | {r['together']:.1f} | "
          f"{r['together'] / r['bare']:.3f}x |")
    print(f"| torch_cudajit, one by one (three compiles) | {r['one by one']:.1f} | "
          f"{r['one by one'] / r['bare']:.3f}x |")
    if r["cupy"] is not None:
        print(f"| CuPy RawModule, three name expressions | {r['cupy']:.1f} | {r['cupy'] / r['bare']:.3f}x |")
    else:
        print("| CuPy RawModule | n/a (needs CuPy and a GPU) | |")


def cold_compile(repeats=15):
    """Medians (ms) of a cache-miss compile and of bare NVRTC on identical inputs."""
    x = torch.empty(64, 1000, device="meta")
    ours, bare, front = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        cj.cache.configure(dir=folder, enabled=True)
        warm = cj.jit(SOFTMAX)
        warm.compile(x, x, arch=90)  # loads NVRTC
        nvrtc = nvrtc_library()
        for i in range(repeats):
            # A new comment per repeat: both sides compile a source never seen before.
            src = SOFTMAX + f"\n// variant {i}\n"
            k = cj.jit(src)
            inputs = k._core.compile_inputs((x, x), 90)
            t0 = time.perf_counter()
            bare_nvrtc_compile(nvrtc, inputs["source"], inputs["filename"], inputs["options"],
                               inputs["name_expressions"])
            t1 = time.perf_counter()
            # Ours from the source text: the front end reading the declarations (cj.jit), then
            # the compile.
            t2 = time.perf_counter()
            k2 = cj.jit(src + "// ours\n")
            t_read = time.perf_counter()
            k2.compile(x, x, arch=90)
            t3 = time.perf_counter()
            assert k2.cache_misses == 1
            bare.append((t1 - t0) * 1e3)
            ours.append((t3 - t2) * 1e3)
            front.append((t_read - t2) * 1e3)
        cj.cache.reset()
    return statistics.median(ours), statistics.median(bare), statistics.median(front)


WARM_CHILD = """
import sys, time, torch
N = 4096
x = torch.randn(N, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
which = sys.argv[1]
if which == "cupy":
    import cupy as cp
    xs, outs = cp.asarray(x), cp.asarray(out)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    k = cp.RawKernel(SRC_RAW, "axpy_f32")
    k(((N + 255) // 256,), (256,), (outs, xs, cp.float32(2.0), cp.int32(N)))
    cp.cuda.Device().synchronize()
elif which == "compile_kernel":
    t0 = time.perf_counter()
    k = torch.cuda._compile_kernel(SRC_RAW, "axpy_f32")
    k(grid=((N + 255) // 256, 1, 1), block=(256, 1, 1), args=[out, x, 2.0, N])
    torch.cuda.synchronize()
else:
    import torch_cudajit as cj
    t0 = time.perf_counter()
    k = cj.jit(SRC)
    k[(N + 255) // 256, 256](out, x, 2.0)
    torch.cuda.synchronize()
t1 = time.perf_counter()
hits = k.cache_hits if which == "torch_cudajit" else -1
print((t1 - t0) * 1e3, hits)
"""

RAW = r"""
extern "C" __global__ void axpy_f32(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
"""


def warm_process(which: str, runs=7):
    """Median ms from kernel creation to the end of the first launch, in fresh processes
    that find the kernel in the disk cache (the first, populating run is not counted)."""
    code = f"SRC = {AXPY!r}\nSRC_RAW = {RAW!r}\n" + WARM_CHILD
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as folder:
        env["TORCH_CUDAJIT_CACHE_DIR"] = folder
        env["CUPY_CACHE_DIR"] = os.path.join(folder, "cupy")
        samples = []
        for i in range(runs + 1):
            r = subprocess.run([sys.executable, "-c", code, which], env=env, capture_output=True,
                               text=True, timeout=300)
            if r.returncode != 0:
                return None, r.stderr.strip().splitlines()[-1]
            ms, hits = r.stdout.split()
            if i > 0:
                if which == "torch_cudajit":
                    assert int(hits) == 1, "the warm process did not hit the cache"
                samples.append(float(ms))
        return statistics.median(samples), ""


def in_process_hit(rounds=4):
    """Launch cost with the disk cache on and off, measured in alternating rounds so that the
    order of measurement within the run does not favour either."""
    from _timing import per_call_us
    x = torch.randn(256, device="cuda")
    out = torch.empty_like(x)
    launches = {cache: cj.jit(AXPY, cache=cache)[1, 256] for cache in (True, False)}
    samples = {True: [], False: [], "add_": []}
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        for cache in order:
            launch = launches[cache]
            samples[cache].append(per_call_us(lambda: launch(out, x, 2.0), repeats=11))
        samples["add_"].append(per_call_us(lambda: x.add_(1), repeats=11))
    med = {k: statistics.median(v) for k, v in samples.items()}
    return [(True, med[True]), (False, med[False]), ("add_", med["add_"])]


def precompile_specs():
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16,
              torch.int32, torch.int64, torch.uint8, torch.complex64, torch.complex128]
    specs = []
    for rank in (1, 2, 3):
        for d in dtypes:
            t = torch.empty((2,) * rank, dtype=d, device="meta")
            specs.append((t, t))
    return specs[:32]


def precompile(workers: int, processes: bool):
    k = cj.jit(COPY, cache=False)  # measure compiles, not disk hits
    t0 = time.perf_counter()
    k.precompile(precompile_specs(), arch=90, workers=workers, processes=processes, progress=False)
    elapsed = time.perf_counter() - t0
    assert len(k.signatures) == 32
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--skip-gpu", action="store_true", help="compile benchmarks only")
    ap.add_argument("--precompile-only", action="store_true", help="only the precompile benchmark")
    ap.add_argument("--compile-only", action="store_true",
                    help="only the compile latency against the user's source (5)")
    ap.add_argument("--latency-only", action="store_true",
                    help="the cold compile (1), the compile latency (5) and, with a GPU, the warm "
                         "process (2): what the compile and cache paths cost, without the "
                         "precompile and launch parts")
    args = ap.parse_args()
    gpu = torch.cuda.is_available() and not args.skip_gpu
    print(f"# cache benchmarks, {time.strftime('%Y-%m-%d')}, "
          f"{torch.cuda.get_device_name() if gpu else 'no GPU'}, {os.cpu_count()} CPUs, "
          f"NVRTC {cj.nvrtc_version()}")

    if args.precompile_only:
        return print_precompile()
    if args.compile_only:
        return print_compile_latency()
    print_cold_compile()
    print_compile_latency()
    if args.latency_only:
        if gpu:
            print_warm_process()
        return
    print_precompile()
    if not gpu:
        return
    print_gpu_part()


def print_cold_compile():
    ours, bare, front = cold_compile()
    print("\n| cold compile (softmax_rows, sm_90) | ms (median of 15) | vs bare NVRTC |")
    print("|---|---|---|")
    print(f"| bare NVRTC (ctypes, same source/options/names) | {bare:.1f} | 1.00x |")
    print(f"| torch_cudajit from source: cj.jit (front end) + compile on a cache miss | {ours:.1f} | "
          f"{ours / bare:.3f}x ({(ours / bare - 1) * 100:+.1f}%) |")
    print(f"| of which the front end (Clang reading the declarations) | {front:.1f} | "
          f"{front / bare:.3f}x ({front / bare * 100:.1f}% of a bare compile) |")


def print_precompile():
    precompile(1, False)  # warm-up: NVRTC loaded, page cache warm
    t1 = statistics.median(precompile(1, False) for _ in range(3))
    t8 = statistics.median(precompile(8, False) for _ in range(3))
    first = precompile(8, True)  # forks the 8 workers
    p8 = statistics.median(precompile(8, True) for _ in range(3))
    print("\n| precompile 32 specializations | s (median of 3) | speed-up |")
    print("|---|---|---|")
    print(f"| 1 worker (in process) | {t1:.2f} | 1.00x |")
    print(f"| 8 threads | {t8:.2f} | {t1 / t8:.2f}x |")
    print(f"| 8 worker processes, first call (forks them; one sample) | {first:.2f} | {t1 / first:.2f}x |")
    print(f"| 8 worker processes, kept (default) | {p8:.2f} | {t1 / p8:.2f}x |")


def print_gpu_part():
    print_warm_process()
    print_in_process_hit()


def print_warm_process():
    print("\n| warm process: creation to end of first launch | ms (median of 7 processes) |")
    print("|---|---|")
    for which in ("torch_cudajit", "cupy", "compile_kernel"):
        ms, err = warm_process(which)
        label = {"torch_cudajit": "torch_cudajit (disk hit)", "cupy": "CuPy RawKernel (its disk cache)",
                 "compile_kernel": "torch.cuda._compile_kernel (no cache)"}[which]
        print(f"| {label} | {ms:.2f} |" if ms is not None else f"| {label} | n/a ({err}) |")


def print_in_process_hit():
    rows = in_process_hit()
    base = rows[2][1]
    print("\n| in-process hit: launch kernel[1, 256](out, x, 2.0) | us per launch (median) | vs x.add_(1) |")
    print("|---|---|---|")
    print(f"| torch x.add_(1) | {base:.2f} | 1.00x |")
    for cache, us in rows[:2]:
        print(f"| torch_cudajit, cache={cache} | {us:.2f} | {us / base:.2f}x |")


if __name__ == "__main__":
    main()
