"""Which shape of run kernel moves the LLaMA block's rotary embedding near the memory floor? The
experiment behind the backend's pointwise kernels over strided views, kept to be rerun.

The rotary embedding of the LLaMA block's q (`benchmarks/_backend_models.py`):
`q * cos + cat((-q2, q1), -1) * sin` over q as a (B, T, H, D) view of the qkv projection's
output (strides T*3*H*D, 3*H*D, D, 1), cos and sin (T, D) tables broadcast over B and H, the
output contiguous. The backend's kernel for it (`cj::for_each_run`) gives each thread one run of
8 elements along D: it unravels the run with divisions by sizes read at run time, loads q's run
as one vector and the rotated half element by element. Hand-written variants, compiled and
launched through torch_cudajit itself, beside eager torch, Inductor and the backend compiling
the same function, in one run:

- `U{n}`: n runs a thread, every load of the n runs issued before the first store;
- `static`: the sizes T, H and D compile-time constants (divisions by constants);
- `vec`: the rotated half loaded as one vector (D/2 is a multiple of 8, so a run lies in one
  half);
- `cs`: q's runs loaded and the output stored streaming (`__ldcs`/`__stcs`: evict first),
  `cs-store` the stores only.

Floor: bytes moved (q's elements read once, the output written once; the tables stay in the L2)
over the bandwidth of a large device-to-device copy measured in the same run. The inputs rotate
over enough sets to exceed the L2, and a pass over them is replayed as a CUDA graph, as in
`row_kernel_probe.py`.

Run: python benchmarks/run_kernel_probe.py [--batch 8] [--tokens 1024] [--heads 16] [--dim 64]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SRC = r"""
#include <cuda_bf16.h>
struct alignas(16) V8 { __nv_bfloat16 v[8]; };

// HINT: 0 plain accesses; 1 q's runs loaded and the output stored streaming (ld.global.cs and
// st.global.cs: evict first); 2 only the stores streaming.
template <int HINT>
__device__ __forceinline__ V8 load8(const __nv_bfloat16* p) {
  if (HINT == 1) {
    const int4 t = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const V8*>(&t);
  }
  return *reinterpret_cast<const V8*>(p);
}
template <int HINT>
__device__ __forceinline__ void store8(__nv_bfloat16* p, const V8& v) {
  if (HINT != 0)
    __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v));
  else
    *reinterpret_cast<V8*>(p) = v;
}

// out (B, T, H, D) = q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q[.., D/2:], q[.., :D/2]).
// A run is 8 consecutive elements along D; run r of the contiguous output starts at r * 8.
template <int U, bool VEC, bool STATIC, int HINT, int TT, int HH, int DD>
__global__ void __launch_bounds__(256) rotary(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ cs, const __nv_bfloat16* __restrict__ sn, long long runs,
    int t_size, int h_size, int d_size, long long q_stride_b, long long q_stride_t) {
  const int T = STATIC ? TT : t_size, H = STATIC ? HH : h_size, D = STATIC ? DD : d_size;
  const int per_head = D / 8, half = D / 2;
  const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; first < runs;
       first += threads * U) {
    V8 x[U], c[U], s[U], o[U];
    long long base[U];
    int col[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long r = first + u * threads;
      const int run = static_cast<int>(r % per_head);
      long long rest = r / per_head;
      const int h = static_cast<int>(rest % H);
      rest /= H;
      const int t = static_cast<int>(rest % T);
      const long long b = rest / T;
      col[u] = run * 8;
      base[u] = b * q_stride_b + t * q_stride_t + static_cast<long long>(h) * D;
      if (r < runs) {
        x[u] = load8<HINT>(q + base[u] + col[u]);
        c[u] = *reinterpret_cast<const V8*>(cs + static_cast<long long>(t) * D + col[u]);
        s[u] = *reinterpret_cast<const V8*>(sn + static_cast<long long>(t) * D + col[u]);
        if (VEC)
          o[u] = *reinterpret_cast<const V8*>(q + base[u] + (col[u] < half ? col[u] + half : col[u] - half));
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long r = first + u * threads;
      if (r >= runs) continue;
      V8 y;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int cc = col[u] + j;
        float rot;
        if (VEC)
          rot = cc < half ? -__bfloat162float(o[u].v[j]) : __bfloat162float(o[u].v[j]);
        else
          rot = cc < half ? -__bfloat162float(q[base[u] + cc + half]) : __bfloat162float(q[base[u] + cc - half]);
        y.v[j] = __float2bfloat16(__bfloat162float(x[u].v[j]) * __bfloat162float(c[u].v[j]) +
                                  rot * __bfloat162float(s[u].v[j]));
      }
      store8<HINT>(out + r * 8, y);
    }
  }
}
"""

# (tag, runs a thread, vector rotated half, static sizes, cache hint)
VARIANTS = [("U1", 1, False, False, 0), ("U1 static", 1, False, True, 0),
            ("U1 static vec", 1, True, True, 0), ("U2 static vec", 2, True, True, 0),
            ("U4 static vec", 4, True, True, 0), ("U4 vec", 4, True, False, 0),
            ("U2", 2, False, False, 0), ("U1 cs", 1, False, False, 1),
            ("U1 cs-store", 1, False, False, 2), ("U1 static vec cs", 1, True, True, 1)]
BLOCK = 256


def rotary(q, cos, sin):
    """The LLaMA block's rotary embedding of q (B, T, H, D), tables (T, D)."""
    half = q.shape[-1] // 2
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return q * c + torch.cat((-q[..., half:], q[..., :half]), -1) * s


def reference(q, cos, sin):
    """The rotary embedding computed in float32 and rounded once, as the kernels compute it
    (eager bfloat16 rounds after each operation, so its result differs where terms cancel)."""
    return rotary(q.float(), cos.float(), sin.float()).to(q.dtype)


def kernels(t: int, h: int, d: int):
    """The variants as torch_cudajit kernels: (tag, kernel, runs a thread)."""
    import torch_cudajit as cj
    out = []
    for tag, u, vec, static, hint in VARIANTS:
        args = (f"{u}, {'true' if vec else 'false'}, {'true' if static else 'false'}, {hint}, "
                f"{t}, {h}, {d}")
        out.append((tag, cj.jit(SRC, template_args=args, std="c++17"), u))
    return out


def launch_args(out, qkv, q, cos, sin):
    """The kernel's arguments for an output and q, a view at the start of the contiguous qkv
    (a raw pointer takes the contiguous tensor; the view's strides are arguments)."""
    b, t, h, d = q.shape
    return (out, qkv, cos, sin, out.numel() // 8, t, h, d, q.stride(0), q.stride(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=64)
    args = ap.parse_args()
    from _probe_timing import time_ms
    import torch_cudajit  # noqa: F401  (registers the backend)
    b, t, h, d = args.batch, args.tokens, args.heads, args.dim
    if d % 16:
        raise ValueError(f"--dim: {d} is not a multiple of 16 (the kernels move runs of 8 per half)")
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}; q ({b}, {t}, {h}, {d}) bf16 as a view of qkv; times in us (medians of 51 "
          f"replays of a CUDA graph of a pass over rotating input sets), and the floor over the time",
          flush=True)
    qkv_bytes = b * t * 3 * h * d * 2
    nsets = max(2, -(-(128 << 20) // qkv_bytes))  # over 128 MiB: past the L2
    cos = torch.randn(t, d, device="cuda", dtype=torch.bfloat16)
    sin = torch.randn(t, d, device="cuda", dtype=torch.bfloat16)
    sets = []
    for _ in range(nsets):
        qkv = torch.randn(b, t, 3 * h * d, device="cuda", dtype=torch.bfloat16)
        q = qkv[..., : h * d].view(b, t, h, d)
        sets.append((q, torch.empty(b, t, h, d, device="cuda", dtype=torch.bfloat16), qkv))
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    big2 = torch.empty_like(big)
    copy_ms = time_ms(lambda: big2.copy_(big), [()], 21)
    bw = 2 * big.numel() / copy_ms / 1e6  # GB/s: bytes read plus written
    floor_us = 2 * b * t * h * d * 2 / bw / 1e3
    cells = [f"floor {floor_us:.1f} (copy {bw:.0f} GB/s)"]

    def check(tag, fn, timed=None):
        """Checks fn(q, out, qkv) (writes out) against the float32 reference (eager's rounding
        after each bfloat16 operation allowed for), then times `timed` (fn by default)."""
        q, out, qkv = sets[0]
        out.fill_(float("nan"))
        fn(q, out, qkv)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, reference(q, cos, sin), rtol=2e-2, atol=1e-1,
                                   msg=lambda m: f"{tag}: {m}")
        us = time_ms(timed or fn, sets) * 1e3
        cells.append(f"{tag} {us:.1f} ({floor_us / us:.2f})")

    check("eager", lambda q, out, qkv: out.copy_(rotary(q, cos, sin)),
          lambda q, out, qkv: rotary(q, cos, sin))
    for name in ("inductor", "cudajit"):
        torch._dynamo.reset()
        fn = torch.compile(rotary, backend=name)
        with torch.no_grad():
            check(name, lambda q, out, qkv, fn=fn: out.copy_(fn(q, cos, sin)),
                  lambda q, out, qkv, fn=fn: fn(q, cos, sin))
    for tag, k, u in kernels(t, h, d):
        runs = b * t * h * d // 8
        grid = -(-runs // (BLOCK * u))

        def launch(q, out, qkv, k=k, grid=grid):
            k[grid, BLOCK](*launch_args(out, qkv, q, cos, sin))
        check(tag, launch)
    print(", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
