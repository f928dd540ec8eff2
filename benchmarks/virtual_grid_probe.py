"""The experiment behind forall's virtual grid (csrc/virtual_grid.h), kept to be rerun: the
README's one-element-per-thread axpy on 1..16 virtual blocks per physical block, with the
wrapper's __restrict__ data pointers, with and without an L2 bulk prefetch of each block's slice
(cp.async.bulk.prefetch.L2), against torch.add in the same run. Hand-written in the shape the
plugin generates and compiled with CuPy's RawModule, so that variants the plugin does not ship
(the prefetch) can be measured beside it.

Floor: bytes moved / HBM bandwidth; torch.add in the same run is the practical ceiling.

Run: python benchmarks/virtual_grid_probe.py [include folder of torch_cudajit]"""
import os
import statistics
import sys

import cupy
import numpy as np
import torch

INC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "torch_cudajit", "include")
SRC = r"""
#define CJ_HAVE_FP16 1
#define CJ_HAVE_BF16 1
#include <cj/cj.cuh>
namespace cj { namespace detail {
__shared__ unsigned vblock_slot[1024];
__shared__ unsigned vgrid_slot;
__device__ __forceinline__ uint3 virtual_block() { return make_uint3(vblock_slot[threadIdx.x], 0, 0); }
__device__ __forceinline__ dim3 virtual_grid() { return dim3(vgrid_slot, 1, 1); }
}}
template <class T> __device__ cj::Array<T,1,cj::Layout<7>> mk(T* p, long long n) { cj::Array<T,1,cj::Layout<7>> r; r.data_ = p; r.shape_[0] = n; r.strides_[0] = 1; return r; }
template <typename T, class L>
__device__ void axpy_plain_body(cj::Array<T, 1, L> out, cj::Array<const T, 1, L> x, cj::Array<const T, 1, L> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(a * float(x[i]) + float(y[i]));
}
template <typename T>
__global__ void axpy_plain(T* o, const T* x, const T* y, float a, long long n) {
  axpy_plain_body<T, cj::Layout<7>>(mk(o, n), mk(x, n), mk(y, n), a);
}
#undef __global__
#define __global__ __device__
#define blockIdx (::cj::detail::virtual_block())
#define gridDim (::cj::detail::virtual_grid())
template <typename T, class L>
__global__ void axpy_readme(cj::Array<T, 1, L> out, cj::Array<const T, 1, L> x, cj::Array<const T, 1, L> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(a * float(x[i]) + float(y[i]));
}
#undef blockIdx
#undef gridDim
#undef __global__
#define __global__ __location__(global)
__device__ __forceinline__ void l2_prefetch(const void* base, long long nbytes, long long begin, long long len) {
  long long b = begin < 0 ? 0 : begin, e = begin + len > nbytes ? nbytes : begin + len;
  const char* p = (const char*)base;
  long long ab = ((long long)(p + b) + 15) & ~15LL, ae = ((long long)(p + e)) & ~15LL;
  if (ae > ab) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(ab), "r"((unsigned)(ae - ab)) : "memory");
}
#define VBODY(T) \
  if (threadIdx.x == 0) { \
    cj::detail::vgrid_slot = vg; \
    if (PF) { long long b = (long long)blockIdx.x * K * blockDim.x * sizeof(T), len = (long long)K * blockDim.x * sizeof(T); \
      l2_prefetch(px, n * sizeof(T), b, len); l2_prefetch(py, n * sizeof(T), b, len); } \
  } \
  __syncthreads(); \
  auto out = mk(po, n); auto x = mk(px, n); auto y = mk(py, n); \
  unsigned v0 = blockIdx.x * K; \
  if (v0 + K <= vg) { \
    _Pragma("unroll") for (int j = 0; j < K; ++j) { cj::detail::vblock_slot[threadIdx.x] = v0 + j; axpy_readme<T, cj::Layout<7>>(out, x, y, a); } \
  } else { \
    for (unsigned v = v0; v < vg; ++v) { cj::detail::vblock_slot[threadIdx.x] = v; axpy_readme<T, cj::Layout<7>>(out, x, y, a); } \
  }
template <int K, class T, bool PF>
__global__ void vres(T* __restrict__ po, const T* __restrict__ px, const T* __restrict__ py, float a, long long n, unsigned vg) { VBODY(T) }
template <int K, class T, bool PF>
__global__ void vplain(T* po, const T* px, const T* py, float a, long long n, unsigned vg) { VBODY(T) }
"""
names = {torch.float32: "float", torch.bfloat16: "__nv_bfloat16", torch.float16: "__half"}
VARIANTS = [("K4", "vres<4, {t}, false>"), ("K8", "vres<8, {t}, false>"),
            ("K4pf", "vres<4, {t}, true>"), ("K8pf", "vres<8, {t}, true>"), ("K16pf", "vres<16, {t}, true>"),
            ("K8pf-norestrict", "vplain<8, {t}, true>")]
exprs = []
for t in names.values():
    exprs.append(f"axpy_plain<{t}>")
    exprs += [e.format(t=t) for _, e in VARIANTS]
mod = cupy.RawModule(code=SRC, options=("-std=c++17", f"-I{INC}", "-I/usr/local/cuda/include"), name_expressions=exprs)

def time_ms(fn, repeats=15, inner=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner): fn()
        b.record(); b.synchronize(); s.append(a.elapsed_time(b) / inner)
    return statistics.median(s)

print(f"# {torch.cuda.get_device_name(0)}; GB/s of torch.add, others as ratio to it", flush=True)
for dtype, tn in names.items():
    for e in (20, 24, 26, 28):
        n = 1 << e
        x = torch.randn(n, device="cuda", dtype=dtype); y = torch.randn(n, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        want = (2.0 * x.float() + y.float()).to(dtype)
        gbs = lambda ms: 3 * n * x.element_size() / ms / 1e6
        inner = max(1, min(200, (1 << 26) // n))
        ref = gbs(time_ms(lambda: torch.add(y, x, alpha=2.0, out=out), inner=inner))
        cells = [f"torch {ref:.0f}"]
        vg = (n + 255) // 256
        calls = [("plain", lambda: mod.get_function(f"axpy_plain<{tn}>")((vg,), (256,), (out.data_ptr(), x.data_ptr(), y.data_ptr(), np.float32(2.0), np.int64(n))))]
        for tag, expr in VARIANTS:
            k = int(tag[1:].split("p")[0].split("-")[0])
            f = mod.get_function(expr.format(t=tn))
            calls.append((tag, lambda f=f, k=k: f(((vg + k - 1) // k,), (256,), (out.data_ptr(), x.data_ptr(), y.data_ptr(), np.float32(2.0), np.int64(n), np.uint32(vg)))))
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            for tag, c in calls:
                out.fill_(float("nan")); c(); torch.cuda.synchronize()
                torch.testing.assert_close(out.float(), want.float(), rtol=1e-2, atol=1e-2)
                cells.append(f"{tag} {gbs(time_ms(c, inner=inner)) / ref:.2f}")
        print(f"{str(dtype)[6:]} 2^{e}: " + ", ".join(cells), flush=True)
