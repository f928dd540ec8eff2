"""Bandwidth of an elementwise kernel, out = a * x + y (three arrays moved), side by side in one
run: torch.add, Triton and CuPy where installed, torch_cudajit's cj::elementwise helper, the
README-style cj::Array kernel (one element per thread), the same through kernel.forall (which
runs it on forall's virtual grid at the larger sizes: csrc/virtual_grid.h), and a raw-pointer
grid-stride kernel; fp32, bf16 and fp16; sizes 2^16 to 2^28.

Floor: bytes moved / HBM bandwidth (the H200's HBM3e: 4.8 TB/s nominal, less in practice);
torch.add, measured in the same run, is the practical ceiling.
Targets: helper >= 0.97x torch.add at 2^24 and above; README kernel through forall >= 0.9x.

Timing: CUDA events around a loop of launches, after a warm-up, median of many repeats.

Run: python benchmarks/bandwidth.py [--plot out.png] [--quick] [--sweep]"""
import argparse
import os
import statistics
import sys

import torch

os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")
import torch_cudajit as cj  # noqa: E402

HELPER = r"""
template <typename T>
__global__ void axpy_helper(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, float a) {
  cj::elementwise(out, [=](T xi, T yi) { return T(a * float(xi) + float(yi)); }, x, y);
}
"""
README = r"""
template <typename T>
__global__ void axpy_readme(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(a * float(x[i]) + float(y[i]));
}
"""
RAW = r"""
template <typename T>
__global__ void axpy_raw(T* out, const T* x, const T* y, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = T(a * float(x[i]) + float(y[i]));
}
"""


def time_ms(fn, repeats, inner):
    """Median milliseconds of one call: CUDA events around `inner` calls, `repeats` times."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)


def triton_axpy():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(out, x, y, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        xv = tl.load(x + offs, mask=m).to(tl.float32)
        yv = tl.load(y + offs, mask=m).to(tl.float32)
        tl.store(out + offs, (a * xv + yv).to(out.dtype.element_ty), mask=m)

    def run(out, x, y, a):
        n = out.numel()
        kernel[(triton.cdiv(n, 1024),)](out, x, y, a, n, BLOCK=1024)
    return run


def cupy_axpy():
    try:
        import cupy
    except ImportError:
        return None
    kernels = {}
    names = {torch.float32: "float", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}

    def run(out, x, y, a):
        t = names[out.dtype]
        if t not in kernels:
            kernels[t] = cupy.RawKernel(
                "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                f'extern "C" __global__ void k({t}* o, const {t}* x, const {t}* y, float a, long long n) {{'
                " long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;"
                f" if (i < n) o[i] = {t}(a * float(x[i]) + float(y[i])); }}", "k")
        n = out.numel()
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernels[t](((n + 255) // 256,), (256,),
                       (out.data_ptr(), x.data_ptr(), y.data_ptr(), cupy.float32(a), cupy.int64(n)))
    return run


def sweep():
    """Launch shapes forall could choose, measured against torch.add: grids for the grid-stride
    helper (waves of resident blocks, one pass of kUnroll vectors per thread, one or two vectors
    per thread) and block sizes for the one-element-per-thread README kernel."""
    helper, readme = cj.jit(HELPER), cj.jit(README)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"# forall sweep, {torch.cuda.get_device_name(0)}: GB/s (median), ratio to torch.add")
    for dtype in (torch.float32, torch.bfloat16):
        for e in (20, 22, 24, 26, 28):
            n = 1 << e
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            inner = max(1, min(200, (1 << 26) // n))
            per_thread = 4 * (16 // x.element_size())  # kUnroll vectors of 16 bytes
            gbs = lambda fn: 3 * n * x.element_size() / time_ms(fn, 15, inner) / 1e6  # noqa: E731
            ref = gbs(lambda: torch.add(y, x, alpha=2.0, out=out))
            cells = [f"torch.add {ref:.0f}"]
            cells.append(f"forall {gbs(lambda: helper.forall(n)(out, x, y, 2.0)) / ref:.3f}")
            for waves in (1, 2, 4, 8, 16):
                g = waves * sms * 8
                cells.append(f"{waves}w {gbs(lambda: helper[g, 256](out, x, y, 2.0)) / ref:.3f}")
            for block in (128, 256, 512):
                g = max(1, -(-n // (block * per_thread)))
                cells.append(f"pass/{block} {gbs(lambda: helper[g, block](out, x, y, 2.0)) / ref:.3f}")
            # One or two 16-byte vectors per thread (the helper's loop then takes its remainder
            # path): finer blocks, as the virtual grid's, against one unrolled pass of four.
            for vectors in (1, 2):
                g = max(1, -(-n // (256 * vectors * (16 // x.element_size()))))
                cells.append(f"vec{vectors}/256 {gbs(lambda: helper[g, 256](out, x, y, 2.0)) / ref:.3f}")
            for block in (128, 256, 512, 1024):
                g = -(-n // block)
                cells.append(f"readme/{block} {gbs(lambda: readme[g, block](out, x, y, 2.0)) / ref:.3f}")
            print(f"{str(dtype)[6:]} 2^{e}: " + ", ".join(cells), flush=True)
            del x, y, out
    # The context's L2 fetch granularity (a driver hint, cuCtxSetLimit) against the one-element
    # kernel, which moves too few bytes per thread to keep enough requests in flight.
    import ctypes
    driver = ctypes.CDLL("libcuda.so.1")
    for granularity in (32, 64, 128):
        if driver.cuCtxSetLimit(5, ctypes.c_size_t(granularity)) != 0:  # CU_LIMIT_MAX_L2_FETCH_GRANULARITY
            print(f"L2 fetch granularity {granularity}: refused")
            continue
        for dtype in (torch.float32, torch.bfloat16):
            n = 1 << 26
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            gbs = lambda fn: 3 * n * x.element_size() / time_ms(fn, 9, 1) / 1e6  # noqa: E731
            ref = gbs(lambda: torch.add(y, x, alpha=2.0, out=out))
            one = gbs(lambda: readme[-(-n // 256), 256](out, x, y, 2.0))
            print(f"L2 fetch granularity {granularity}, {str(dtype)[6:]} 2^26: torch.add {ref:.0f}, "
                  f"readme/256 {one:.0f} ({one / ref:.3f})", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot", default=None, help="write a PNG plot of GB/s against size")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--sweep", action="store_true", help="only the forall launch-shape sweep")
    args = ap.parse_args()
    if args.sweep:
        return sweep()
    helper, readme, raw = cj.jit(HELPER), cj.jit(README), cj.jit(RAW)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = {
        "torch.add": lambda o, x, y, a: torch.add(y, x, alpha=a, out=o),
        "Triton": triton_axpy(),
        "CuPy RawKernel": cupy_axpy(),
        "cj::elementwise helper (forall)": lambda o, x, y, a: helper.forall(o.numel())(o, x, y, a),
        "README kernel, [n/256, 256]": lambda o, x, y, a: readme[(o.numel() + 255) // 256, 256](o, x, y, a),
        "README kernel, forall": lambda o, x, y, a: readme.forall(o.numel())(o, x, y, a),
        "raw grid-stride, [4*SMs, 256]": lambda o, x, y, a: raw[4 * sms, 256](o, x, y, a, o.numel()),
    }
    rows = {k: v for k, v in rows.items() if v is not None}
    exps = [16, 20, 24, 28] if args.quick else list(range(16, 29, 2))
    dtypes = [torch.float32, torch.bfloat16, torch.float16]
    results = {}  # (dtype, exp) -> {row: GB/s}
    for dtype in dtypes:
        for e in exps:
            n = 1 << e
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            want = (2.0 * x.float() + y.float()).to(dtype)
            bytes_moved = 3 * n * x.element_size()
            inner = max(1, min(200, (1 << 26) // n))
            repeats = 5 if args.quick else 15
            res = {}
            for name, fn in rows.items():
                out.fill_(float("nan"))
                fn(out, x, y, 2.0)
                torch.cuda.synchronize()
                torch.testing.assert_close(out.float(), want.float(), rtol=1e-2, atol=1e-2,
                                           msg=lambda m: f"{name}: {m}")
                ms = time_ms(lambda: fn(out, x, y, 2.0), repeats, inner)
                res[name] = bytes_moved / ms / 1e6
            results[(dtype, e)] = res
            del x, y, out, want
    gpu = torch.cuda.get_device_name(0)
    print(f"# bandwidth: out = a*x + y, GB/s (median), {gpu}, torch {torch.__version__}")
    for dtype in dtypes:
        print(f"\n## {str(dtype).replace('torch.', '')}\n")
        print("| kernel | " + " | ".join(f"2^{e}" for e in exps) + " | vs torch.add at 2^24+ |")
        print("|---|" + "---|" * (len(exps) + 1))
        for name in rows:
            vals = [results[(dtype, e)][name] for e in exps]
            big = [results[(dtype, e)][name] / results[(dtype, e)]["torch.add"] for e in exps if e >= 24]
            print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in vals) +
                  f" | {min(big):.2f}x-{max(big):.2f}x |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.5), sharey=True)
        for ax, dtype in zip(axes, dtypes):
            for name in rows:
                ax.plot([1 << e for e in exps], [results[(dtype, e)][name] for e in exps], marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_title(str(dtype).replace("torch.", ""))
            ax.set_xlabel("elements")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel("GB/s (3 arrays moved)")
        axes[-1].legend(fontsize=8, loc="lower right")
        fig.suptitle(f"out = a*x + y on {gpu}")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
