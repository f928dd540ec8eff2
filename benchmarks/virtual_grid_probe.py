"""How fast can a kernel that loads one element per thread per instruction go? The experiment
behind forall's virtual grid (csrc/virtual_grid.h), kept to be rerun.

Hand-written kernels in the shape the virtual grid generates (K blocks of 256 elements per
256-thread block, `__restrict__` pointers, every load issued before the first store), compiled
with CuPy's RawModule, beside torch_cudajit's own forall launch of the README kernel and
torch.add, in one run:

- `scalar K`: one element per thread per virtual block, no bounds check: the ceiling for a
  kernel whose loads are one element wide and find their data in HBM;
- `scalar K L2::256B`: the same with an L2 fetch-size hint on the loads;
- `pairs R2`: each thread runs two adjacent virtual threads (a warp's load spans 128 bytes, half
  of them used);
- `prefetch D`: `scalar K` whose block first prefetches into L2 (one TMA bulk request per input)
  what block blockIdx.x + D will read, as the virtual grid does for narrow read-only tensors
  (it uses D = 4 x SMs, 528 on an H200);
- `2-wide loads`: two adjacent elements per load instruction, one element per store;
- `2-wide`: two elements per load and per store;
- `forall`: the README kernel through kernel.forall (the virtual grid).

Floor: bytes moved / HBM bandwidth; torch.add (16-byte vector accesses) is the practical ceiling.

Run: python benchmarks/virtual_grid_probe.py"""
import os
import statistics
import sys

import cupy
import numpy as np
import torch

os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")
sys.path.insert(0, os.path.dirname(__file__))
import torch_cudajit as cj  # noqa: E402
from bandwidth import README, time_ms  # noqa: E402

SRC = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
template <class T> __device__ __forceinline__ float to_f(T v) { return float(v); }
template <> __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T load(const T* p, bool hint) {
  if (!hint || sizeof(T) != 2) return *p;
  unsigned short r;
  asm("ld.global.nc.L2::256B.b16 %0, [%1];" : "=h"(r) : "l"(p));
  return *reinterpret_cast<T*>(&r);
}
// K blocks of 256 elements per block; R adjacent elements per thread (R = 1: one per thread).
template <int K, int R, bool HINT, class T>
__global__ void scalar(T* __restrict__ o, const T* __restrict__ x, const T* __restrict__ y, float a) {
  const long long base = (long long)blockIdx.x * K * 256;
  T xs[K], ys[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const long long i = base + (j / R) * 256 * R + R * threadIdx.x + j % R;
    xs[j] = load(x + i, HINT); ys[j] = load(y + i, HINT);
  }
#pragma unroll
  for (int j = 0; j < K; ++j)
    o[base + (j / R) * 256 * R + R * threadIdx.x + j % R] = T(a * to_f(xs[j]) + to_f(ys[j]));
}
// scalar<K, 1, false> whose block first asks the TMA unit to prefetch into L2 the bytes of x
// and y that block blockIdx.x + D will read (one bulk request per array).
template <int K, int D, class T>
__global__ void prefetched(T* __restrict__ o, const T* __restrict__ x, const T* __restrict__ y, float a) {
  constexpr unsigned kBytes = K * 256 * sizeof(T);
  if (threadIdx.x < 2 && blockIdx.x + D < gridDim.x) {
    const T* p = (threadIdx.x == 0 ? x : y) + (long long)(blockIdx.x + D) * K * 256;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(kBytes) : "memory");
  }
  const long long base = (long long)blockIdx.x * K * 256;
  T xs[K], ys[K];
#pragma unroll
  for (int j = 0; j < K; ++j) { xs[j] = x[base + j * 256 + threadIdx.x]; ys[j] = y[base + j * 256 + threadIdx.x]; }
#pragma unroll
  for (int j = 0; j < K; ++j) o[base + j * 256 + threadIdx.x] = T(a * to_f(xs[j]) + to_f(ys[j]));
}
// Two adjacent elements per load instruction; stores two-wide (WIDE) or one element each.
template <int K, bool WIDE, class T, class T2>
__global__ void pairs(T* __restrict__ o, const T* __restrict__ x, const T* __restrict__ y, float a) {
  const long long base = (long long)blockIdx.x * K * 256 / 2;
#pragma unroll
  for (int s = 0; s < K / 2; ++s) {
    const long long i = base + s * 256 + threadIdx.x;
    const T2 xv = reinterpret_cast<const T2*>(x)[i], yv = reinterpret_cast<const T2*>(y)[i];
    const T r0 = T(a * to_f(xv.x) + to_f(yv.x)), r1 = T(a * to_f(xv.y) + to_f(yv.y));
    if (WIDE) { T2 r; r.x = r0; r.y = r1; reinterpret_cast<T2*>(o)[i] = r; }
    else { o[2 * i] = r0; o[2 * i + 1] = r1; }
  }
}
"""
K = 4
TYPES = {torch.float32: ("float", "float2"), torch.bfloat16: ("__nv_bfloat16", "__nv_bfloat162"),
         torch.float16: ("__half", "__half2")}
# (tag, blocks of 256 elements per block, kernel)
VARIANTS = [(f"scalar K{K}", K, f"scalar<{K}, 1, false, {{t}}>"), ("scalar K8", 8, "scalar<8, 1, false, {t}>"),
            (f"scalar K{K} L2::256B", K, f"scalar<{K}, 1, true, {{t}}>"),
            ("pairs R2", K, f"scalar<{K}, 2, false, {{t}}>"),
            *[(f"prefetch D{d}", K, f"prefetched<{K}, {d}, {{t}}>") for d in (0, 264, 528, 1056)],
            ("2-wide loads", K, f"pairs<{K}, false, {{t}}, {{t2}}>"), ("2-wide", K, f"pairs<{K}, true, {{t}}, {{t2}}>")]
exprs = [e.format(t=t, t2=t2) for t, t2 in TYPES.values() for _, _, e in VARIANTS]
mod = cupy.RawModule(code=SRC, options=("-std=c++17", "-I/usr/local/cuda/include"), name_expressions=exprs)
readme = cj.jit(README)

print(f"# {torch.cuda.get_device_name(0)}; torch.add in GB/s, the others as a ratio to it; "
      f"medians of 31 repeats", flush=True)
for dtype, (t, t2) in TYPES.items():
    for e in (24, 26, 28):
        n = 1 << e  # a multiple of 8 * 256: the hand-written kernels have no bounds checks
        x = torch.randn(n, device="cuda", dtype=dtype)
        y = torch.randn(n, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        want = (2.0 * x.float() + y.float()).to(dtype)
        inner = max(1, min(100, (1 << 27) // n))
        gbs = lambda ms: 3 * n * x.element_size() / ms / 1e6
        ref = gbs(time_ms(lambda: torch.add(y, x, alpha=2.0, out=out), 31, inner))
        cells = [f"torch.add {ref:.0f}"]
        calls = []
        for tag, k, expr in VARIANTS:
            f = mod.get_function(expr.format(t=t, t2=t2))
            calls.append((tag, lambda f=f, k=k: f((n // (256 * k),), (256,), (out.data_ptr(), x.data_ptr(),
                                                                          y.data_ptr(), np.float32(2.0)))))
        calls.append(("forall", lambda: readme.forall(n)(out, x, y, 2.0)))
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            for tag, call in calls:
                out.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                torch.testing.assert_close(out, want, rtol=0, atol=0, msg=lambda m: f"{tag}: {m}")
                cells.append(f"{tag} {gbs(time_ms(call, 31, inner)) / ref:.3f}")
        print(f"{str(dtype)[6:]} 2^{e}: " + ", ".join(cells), flush=True)
