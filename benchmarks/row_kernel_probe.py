"""How close to the memory floor can a row kernel (RMSNorm over the last dimension) go, and which
shape of kernel gets there? The experiment behind the backend's row kernels, kept to be rerun.

Hand-written RMSNorm kernels (bf16 rows, fp32 sums, 16-byte loads, every load of a row issued
before its reduction), compiled with CuPy's RawModule, beside eager torch, Inductor and the
cudajit backend compiling the same function, in one run:

- `L{lanes} R{rows}`: `lanes` elements per thread (cols / lanes threads along x, 16-byte
  accesses, 8-byte ones for `L4`), `rows` rows per block along y, a block per `rows` rows (the
  backend's row kernels today are `L16 R1`; Inductor's RMSNorm over 1024 columns, a persistent
  reduction with 8 warps a row, is `L4 R1`);
- `... persistent`: as many blocks as fit on the GPU at once, each looping over rows;
- `... next`: persistent, and each thread loads its part of the next row before reducing the
  current one (two rows in flight per thread);
- `... cs`: the row's loads and stores streaming (`__ldcs`/`__stcs`: evict first, as data read
  or written once), `cs-load` and `cs-store` one of the two.

Floor: bytes moved (the input read once, the output written once, the weight once) over the
bandwidth of a large device-to-device copy measured in the same run. The inputs rotate over
enough sets to exceed the L2 cache, so the numbers are HBM's, as in a model; a pass over them is
replayed as a CUDA graph, so the host's cost of each call (Python, a compiled function's
wrapper) is out of the numbers.

Run: python benchmarks/row_kernel_probe.py [--rows 8192] [--cols 1024,768]"""
import argparse
import os
import sys

import cupy
import torch
import torch.nn.functional as F

os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from _probe_timing import time_ms  # noqa: E402

SRC = r"""
#include <cuda_bf16.h>
// E elements moved as one access: 8 (16 bytes), or 4 where a thread holds 4 (8 bytes).
template <int E> struct alignas(2 * E) VE { __nv_bfloat16 v[E]; };
template <int E> struct Bits;
template <> struct Bits<8> { using type = int4; };
template <> struct Bits<4> { using type = int2; };
template <int LANES> __host__ __device__ constexpr int width() { return LANES < 8 ? LANES : 8; }
// A thread's LANES elements of a row, in accesses of width<LANES>() elements.
template <int LANES> using Part = VE<width<LANES>()>[LANES / width<LANES>()];
// Sum over the threads along x of one row (a warp, or several through shared memory).
template <int ROWS>
__device__ __forceinline__ float row_sum(float s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (blockDim.x <= 32) return s;
  __shared__ float part[ROWS][32];
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.y][threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) s += part[threadIdx.y][w];
  return s;
}
// HINT: 0 plain loads and stores; 1 the row's loads and stores streaming (ld.global.cs and
// st.global.cs: evict first, the data is used once); 2 streaming loads only; 3 streaming stores
// only.
template <int E, int HINT>
__device__ __forceinline__ VE<E> load_e(const __nv_bfloat16* p) {
  using B = typename Bits<E>::type;
  if (HINT == 1 || HINT == 2) {
    const B t = __ldcs(reinterpret_cast<const B*>(p));
    return *reinterpret_cast<const VE<E>*>(&t);
  }
  return *reinterpret_cast<const VE<E>*>(p);
}
template <int E, int HINT>
__device__ __forceinline__ void store_e(__nv_bfloat16* p, const VE<E>& v) {
  using B = typename Bits<E>::type;
  if (HINT == 1 || HINT == 3)
    __stcs(reinterpret_cast<B*>(p), *reinterpret_cast<const B*>(&v));
  else
    *reinterpret_cast<VE<E>*>(p) = v;
}
template <int LANES, int HINT>
__device__ __forceinline__ void load_row(Part<LANES>& r, const __nv_bfloat16* __restrict__ x,
                                         long long row, int cols) {
  constexpr int E = width<LANES>();
#pragma unroll
  for (int u = 0; u < LANES / E; ++u) {
    const int c = (u * blockDim.x + threadIdx.x) * E;
    if (c < cols) r[u] = load_e<E, HINT>(x + row * cols + c);
  }
}
template <int LANES, int HINT>
__device__ __forceinline__ void norm_row(const Part<LANES>& r, __nv_bfloat16* __restrict__ y,
                                         const __nv_bfloat16* __restrict__ w, long long row,
                                         int cols, float inv) {
  constexpr int E = width<LANES>();
#pragma unroll
  for (int u = 0; u < LANES / E; ++u) {
    const int c = (u * blockDim.x + threadIdx.x) * E;
    if (c < cols) {
      const VE<E> wv = *reinterpret_cast<const VE<E>*>(w + c);
      VE<E> o;
#pragma unroll
      for (int j = 0; j < E; ++j)
        o.v[j] = __float2bfloat16(__bfloat162float(r[u].v[j]) * inv * __bfloat162float(wv.v[j]));
      store_e<E, HINT>(y + row * cols + c, o);
    }
  }
}
template <int LANES>
__device__ __forceinline__ float sum_sq(const Part<LANES>& r, int cols) {
  constexpr int E = width<LANES>();
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < LANES / E; ++u) {
    const int c = (u * blockDim.x + threadIdx.x) * E;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const float v = __bfloat162float(r[u].v[j]);
      if (c < cols) s += v * v;
    }
  }
  return s;
}
// NEXT: load the block's next row before reducing this one.
template <int LANES, int ROWS, bool NEXT, int HINT>
__global__ void __launch_bounds__(512) rms(__nv_bfloat16* __restrict__ y, const __nv_bfloat16* __restrict__ x,
                    const __nv_bfloat16* __restrict__ w, long long rows, int cols, float eps) {
  const long long stride = (long long)gridDim.x * ROWS;
  long long row = (long long)blockIdx.x * ROWS + threadIdx.y;
  Part<LANES> r, n;
  if (row < rows) load_row<LANES, HINT>(r, x, row, cols);
  // The loop's trip count is the same for every row of a block (rows pads to ROWS), so the
  // barriers in row_sum are reached by all threads.
  for (long long base = (long long)blockIdx.x * ROWS; base < rows; base += stride, row += stride) {
    if (NEXT && row + stride < rows) load_row<LANES, HINT>(n, x, row + stride, cols);
    const float inv = rsqrtf(row_sum<ROWS>(sum_sq<LANES>(r, cols)) / cols + eps);
    if (row < rows) norm_row<LANES, HINT>(r, y, w, row, cols, inv);
    if (NEXT) {
#pragma unroll
      for (int u = 0; u < LANES / width<LANES>(); ++u) r[u] = n[u];
    } else if (row + stride < rows) {
      load_row<LANES, HINT>(r, x, row + stride, cols);
    }
  }
}
"""

# (tag, lanes, rows per block, persistent, next, cache hint)
VARIANTS = [("L16 R1", 16, 1, False, False, 0), ("L8 R1", 8, 1, False, False, 0),
            ("L32 R4", 32, 4, False, False, 0), ("L16 R4", 16, 4, False, False, 0),
            ("L8 R2", 8, 2, False, False, 0), ("L32 R8", 32, 8, False, False, 0),
            ("L16 R4 persistent", 16, 4, True, False, 0), ("L16 R4 next", 16, 4, True, True, 0),
            ("L32 R4 next", 32, 4, True, True, 0), ("L8 R2 next", 8, 2, True, True, 0),
            ("L16 R1 cs", 16, 1, False, False, 1), ("L16 R1 cs-load", 16, 1, False, False, 2),
            ("L16 R1 cs-store", 16, 1, False, False, 3), ("L8 R1 cs", 8, 1, False, False, 1),
            ("L16 R4 cs", 16, 4, False, False, 1), ("L4 R1", 4, 1, False, False, 0),
            ("L4 R2", 4, 2, False, False, 0)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", default="1024,768")
    args = ap.parse_args()
    import torch_cudajit  # noqa: F401  (registers the backend)
    exprs = [f"rms<{lanes}, {r}, {'true' if nx else 'false'}, {hint}>"
             for _, lanes, r, _, nx, hint in VARIANTS]
    mod = cupy.RawModule(code=SRC, options=("-std=c++17", "-I/usr/local/cuda/include"),
                         name_expressions=exprs)
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    print(f"# {props.name}; {args.rows} rows of bf16; times in us (medians of 51 replays of "
          f"a CUDA graph of a pass over rotating input sets), and the floor over the time", flush=True)
    eps = 1e-6
    for cols in (int(c) for c in args.cols.split(",")):
        rows = args.rows
        nsets = max(2, -(-(128 << 20) // (rows * cols * 2)))  # over 128 MiB: past the L2
        sets = [(torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16),
                 torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        big2 = torch.empty_like(big)
        copy_ms = time_ms(lambda: big2.copy_(big), [()], 21)
        bw = 2 * big.numel() / copy_ms / 1e6  # GB/s: bytes read plus written
        floor_us = (2 * rows * cols * 2 + cols * 2) / bw / 1e3
        cells = [f"floor {floor_us:.1f} (copy {bw:.0f} GB/s)"]

        def check(tag, fn, timed=None):
            """Checks fn(x, y) (writes y) against float32 torch, then times `timed` (fn by
            default)."""
            x, y = sets[0]
            y.fill_(float("nan"))
            fn(x, y)
            torch.cuda.synchronize()
            want = F.rms_norm(x.float(), (cols,), w.float(), eps).to(torch.bfloat16)
            torch.testing.assert_close(y, want, rtol=2e-2, atol=2e-2, msg=lambda m: f"{tag}: {m}")
            us = time_ms(timed or fn, sets) * 1e3
            cells.append(f"{tag} {us:.1f} ({floor_us / us:.2f})")

        norm = lambda x: F.rms_norm(x, (cols,), w, eps)  # noqa: E731
        check("eager", lambda x, y: y.copy_(norm(x)), lambda x, y: norm(x))
        for name in ("inductor", "cudajit"):
            torch._dynamo.reset()
            fn = torch.compile(norm, backend=name)
            with torch.no_grad():
                check(name, lambda x, y, fn=fn: y.copy_(fn(x)), lambda x, y, fn=fn: fn(x))
        for (tag, lanes, r, persistent, nx, _), expr in zip(VARIANTS, exprs):
            f = mod.get_function(expr)
            threads = max(32, (-(-cols // lanes) + 31) // 32 * 32)
            if threads * r > 512 or cols > threads * lanes:
                continue
            blocks = -(-rows // r)
            if persistent:
                per_sm = f.max_active_blocks_per_multiprocessor(threads * r, 0) \
                    if hasattr(f, "max_active_blocks_per_multiprocessor") else 2048 // (threads * r)
                blocks = min(blocks, sms * per_sm)

            def launch(x, y, f=f, blocks=blocks, threads=threads, r=r):
                # On torch's current stream (the capture's, while a graph is captured).
                with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                    f((blocks,), (threads, r), (y.data_ptr(), x.data_ptr(), w.data_ptr(),
                                                cupy.int64(rows), cupy.int32(cols),
                                                cupy.float32(eps)))
            check(tag, launch)
        print(f"cols {cols}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
