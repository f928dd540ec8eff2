"""Launch overhead: host time per launch of a tiny kernel with 3 tensors and 1 scalar,
from Python, against a native torch op and the peers installed (CuPy RawKernel, Triton,
numba-cuda, torch.cuda._compile_kernel), all in one run.

Floor: the plain C++ <<<>>> launch loop (examples/deploy --bench measures it; see RESULTS.md).
Target: torch_cudajit <= 0.8x the native torch op (x.add_(1)) of the same run.

Run: python benchmarks/launch_overhead.py [--markdown]"""
import argparse
import os
import sys

import torch

# One-block launches are what these benchmarks measure, not a mistake to warn about.
os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")

sys.path.insert(0, os.path.dirname(__file__))
from _timing import per_call_us  # noqa: E402

import torch_cudajit as cj  # noqa: E402

N = 256
SRC = r"""
template <typename T>
__global__ void axpy3(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
"""
RAW_SRC = r"""
extern "C" __global__ void axpy3(float* out, const float* x, const float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
"""


def bench_all():
    dev = torch.device("cuda")
    x = torch.randn(N, device=dev)
    y = torch.randn(N, device=dev)
    out = torch.empty(N, device=dev)
    rows = []

    rows.append(("torch x.add_(1) (native op)", per_call_us(lambda: x.add_(1))))
    rows.append(("torch torch.add(y, x, alpha=2.0, out=out)", per_call_us(lambda: torch.add(y, x, alpha=2.0, out=out))))

    k = cj.jit(SRC)
    launch = k[1, N]
    rows.append(("torch_cudajit kernel[1, 256](out, x, y, 2.0)", per_call_us(lambda: launch(out, x, y, 2.0))))
    rows.append(("torch_cudajit kernel[1, 256] looked up per call", per_call_us(lambda: k[1, N](out, x, y, 2.0))))
    rows.append(("torch_cudajit kernel.forall(256)(out, x, y, 2.0)", per_call_us(lambda: k.forall(N)(out, x, y, 2.0))))
    sk = k.specialize(out, x, y, 2.0)[1, N]
    rows.append(("torch_cudajit specialize(...)[1, 256]", per_call_us(lambda: sk(out, x, y, 2.0))))
    raw = cj.jit(RAW_SRC)[1, N]
    rows.append(("torch_cudajit raw-pointer kernel", per_call_us(lambda: raw(out, x, y, 2.0, N))))
    torch.testing.assert_close(out, 2.0 * x + y)

    try:
        import cupy as cp

        ck = cp.RawKernel(RAW_SRC, "axpy3")
        cx, cy, cout = cp.asarray(x), cp.asarray(y), cp.asarray(out)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            rows.append(("CuPy RawKernel (CuPy arrays)",
                         per_call_us(lambda: ck((1,), (N,), (cout, cx, cy, cp.float32(2.0), cp.int32(N))))))
    except Exception as e:  # noqa: BLE001
        rows.append((f"CuPy: unavailable ({type(e).__name__})", None))

    try:
        import triton
        import triton.language as tl

        @triton.jit
        def axpy3_tl(out_ptr, x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

        rows.append(("Triton", per_call_us(lambda: axpy3_tl[(1,)](out, x, y, 2.0, N, BLOCK=N))))
    except Exception as e:  # noqa: BLE001
        rows.append((f"Triton: unavailable ({type(e).__name__})", None))

    try:
        import numpy

        numpy.row_stack = numpy.vstack
        from numba import cuda as ncuda

        @ncuda.jit
        def axpy3_nb(o, a_x, a_y, a):
            i = ncuda.grid(1)
            if i < o.shape[0]:
                o[i] = a * a_x[i] + a_y[i]

        stream = ncuda.external_stream(torch.cuda.current_stream().cuda_stream)
        rows.append(("numba-cuda (torch tensors)",
                     per_call_us(lambda: axpy3_nb[1, N, stream](out, x, y, 2.0), calls=500, repeats=11)))
    except Exception as e:  # noqa: BLE001
        rows.append((f"numba-cuda: unavailable ({type(e).__name__}: {e})", None))

    try:
        ck2 = torch.cuda._compile_kernel(RAW_SRC, "axpy3")
        rows.append(("torch.cuda._compile_kernel",
                     per_call_us(lambda: ck2(grid=(1, 1, 1), block=(N, 1, 1), args=[out, x, y, 2.0, N]),
                                 calls=500, repeats=11)))
    except Exception as e:  # noqa: BLE001
        rows.append((f"torch.cuda._compile_kernel: unavailable ({type(e).__name__})", None))
    # Both ends of the run, to show drift within it.
    rows.append(("torch x.add_(1) (native op, again at the end)", per_call_us(lambda: x.add_(1))))
    rows.append(("torch_cudajit kernel[1, 256] (again at the end)", per_call_us(lambda: launch(out, x, y, 2.0))))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.parse_args()
    rows = bench_all()
    native = rows[0][1]
    print(f"# launch overhead, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| path | us per launch (median) | vs x.add_(1) |")
    print("|---|---|---|")
    for name, us in rows:
        if us is None:
            print(f"| {name} | - | - |")
        else:
            print(f"| {name} | {us:.2f} | {us / native:.2f}x |")


if __name__ == "__main__":
    main()
