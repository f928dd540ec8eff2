"""Shared tables and helpers of the torch_cudajit test suite (imported by the test modules)."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest
import torch

from torch_cudajit._loader import _C

#: Lines printed at the end of the pytest run (conftest's pytest_terminal_summary), by key: test
#: modules keep counts there (e.g. test_file_corpus.py: files, kernels, compiled).
SUMMARY: dict[str, str] = {}


#: A templated rank-1 scale kernel, the cache tests' common subject.
SCALE = r"""
template <typename T>
__global__ void scale(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
"""


#: out += a * x over the first n elements: the op-path tests' common subject (one written
#: tensor, one read-only tensor, a float and an int).
ACCUMULATE = r"""
template <typename T>
__global__ void accumulate(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a, int n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = out[i] + a * x[i];
}
"""


#: The README's one-element-per-thread kernel, out = a*x + y: the subject of the roofline and
#: virtual-grid tests.
README_AXPY = r"""
template <typename T>
__global__ void axpy_readme(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(a * float(x[i]) + float(y[i]));
}
"""


def forall_axpy(kernel, n, dtype, device):
    """Launches ``kernel.forall(n)(out, x, y, 2.0)`` (an axpy kernel) on random inputs into a
    poisoned output, checks it bit for bit against torch and returns the arguments."""
    x, y = random_values([n], dtype, device), random_values([n], dtype, device)
    out = torch.empty_like(x)
    want = (2.0 * x.float() + y.float()).to(dtype)
    poison_(out, want)
    kernel.forall(n)(out, x, y, 2.0)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    return out, x, y, 2.0


# -- dtypes ------------------------------------------------------------------------------------

#: Every dtype a kernel takes, with the name torch_cudajit's signatures use for it.
DTYPE_NAMES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.bool: "bool",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}
DTYPES = list(DTYPE_NAMES)
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX_DTYPES = [torch.complex64, torch.complex128]
INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def dtype_id(dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def dtype_params(dtypes=None):
    """pytest.param per dtype, with the dtype's name as id."""
    return [pytest.param(d, id=dtype_id(d)) for d in (DTYPES if dtypes is None else dtypes)]


# -- values --------------------------------------------------------------------------------------


def random_values(shape, dtype, device="cpu"):
    """Random values that are never zero (bool: a random mix of True and False).

    Magnitudes stay small (|v| <= 40 for integers, 0.5 <= |v| <= 2 for floating point) so that
    scaling by small factors neither overflows nor meets the integer poison value."""
    shape = tuple(shape)
    if dtype == torch.bool:
        v = torch.rand(shape) < 0.5
        if v.numel() >= 2:  # make sure both values occur
            v.view(-1)[0] = True
            v.view(-1)[1] = False
    elif dtype.is_complex:
        real = torch.float32 if dtype == torch.complex64 else torch.float64
        v = torch.complex(_nonzero_float(shape, real), _nonzero_float(shape, real))
    elif dtype.is_floating_point:
        v = _nonzero_float(shape, torch.float64).to(dtype)
    elif dtype == torch.uint8:
        v = torch.randint(1, 41, shape, dtype=torch.int64).to(dtype)
    else:
        mag = torch.randint(1, 41, shape, dtype=torch.int64)
        sign = torch.where(torch.rand(shape) < 0.5, -1, 1)
        v = (mag * sign).to(dtype)
    return v.to(device)


def _nonzero_float(shape, dtype):
    mag = torch.rand(shape, dtype=torch.float64) * 1.5 + 0.5
    sign = torch.where(torch.rand(shape) < 0.5, -1.0, 1.0).to(torch.float64)
    return (mag * sign).to(dtype)


def poison_value(dtype):
    """A value no test input or expected output takes: NaN, or an integer type's maximum."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return None  # no third value: bool outputs are poisoned with the negated expectation
    return torch.iinfo(dtype).max


def poison_(t: torch.Tensor, expected: torch.Tensor | None = None) -> torch.Tensor:
    """Fills t with a value that differs from `expected` everywhere (in place)."""
    if t.dtype == torch.bool:
        if expected is None:
            t.copy_(torch.rand(t.shape, device=t.device) < 0.5)
        else:
            t.copy_(~expected.to(t.device))
    else:
        t.fill_(poison_value(t.dtype))
    return t


# -- layouts -------------------------------------------------------------------------------------

#: 2-D layouts of a tensor argument. "expanded" (a stride-0 broadcast) is for read-only inputs.
LAYOUTS_2D = ["contiguous", "transposed", "sliced"]
INPUT_LAYOUTS_2D = LAYOUTS_2D + ["expanded"]


def base_shape(shape, layout):
    h, w = shape
    return {"contiguous": (h, w), "transposed": (w, h), "sliced": (h, 2 * w), "expanded": (1, w)}[layout]


def view_of(base: torch.Tensor, layout: str, shape=None) -> torch.Tensor:
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.t()
    if layout == "sliced":
        return base[:, ::2]
    if layout == "expanded":
        return base.expand(shape)
    raise ValueError(layout)


def is_contiguous_layout(layout: str) -> bool:
    return layout == "contiguous"


def make_input(shape, dtype, layout, device="cpu"):
    """(view, reference): a random tensor of `shape` in `layout`, and a contiguous copy of it."""
    base = random_values(base_shape(shape, layout), dtype, device)
    view = view_of(base, layout, shape)
    assert tuple(view.shape) == tuple(shape)
    assert view.is_contiguous() == (layout == "contiguous"), (layout, view.stride())
    return view, view.contiguous().clone()


class PoisonedOutput:
    """An output tensor in a given layout, poisoned, with a check that the kernel wrote every
    element of the view and nothing of the base tensor outside the view."""

    def __init__(self, shape, dtype, layout, device, expected=None):
        self.layout = layout
        self.base = torch.empty(base_shape(shape, layout), dtype=dtype, device=device)
        poison_(self.base)
        self.view = view_of(self.base, layout, shape)
        poison_(self.view, expected)
        self.before = self.base.clone()

    def check(self, expected, exact=True):
        kw = dict(rtol=0, atol=0) if exact else {}
        torch.testing.assert_close(self.view, expected.to(self.view.device), **kw)
        outside = torch.ones(self.base.shape, dtype=torch.bool, device=self.base.device)
        view_of(outside, self.layout).fill_(False)
        torch.testing.assert_close(self.base[outside], self.before[outside], rtol=0, atol=0,
                                   equal_nan=True, msg="the kernel wrote outside its output view")


def blocks(n: int, block: int) -> int:
    return (n + block - 1) // block


# -- the launch fast path's exception bug ----------------------------------------------------------


class WrongExceptionType(AssertionError):
    """The right error (its message matched) was raised with the wrong exception type."""


def assert_raises(exc_type, match, fn, *args, **kwargs):
    """Like pytest.raises(exc_type, match=match), but matches the message first, so that an
    error raised with the wrong type fails with WrongExceptionType (xfail-able precisely)."""
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    info.match(match)
    if not isinstance(info.value, exc_type):
        raise WrongExceptionType(
            f"expected {exc_type.__name__}, got {type(info.value).__name__}: {info.value}")
    return info


#: What a CPU tensor passed to a launch is told after "kernels take CUDA tensors" (a regex):
#: to move it, or, where no CUDA driver can be loaded and nothing launches, that compiling with
#: arch= works without a GPU.
CPU_TENSOR_ADVICE = (r". Move it with .cuda\(\) or .to\('cuda'\)" if _C.driver_available()
                     else r", and this process cannot launch kernels: .*\. Compiling to PTX/CUBIN "
                          r"\(kernel.compile\(\.\.\., arch=\.\.\.\)\) works without a GPU")


#: How a launch passes its arguments: positionally (the C++ fast path) or by keyword (the
#: Python slow path, which normalises and calls Launcher.launch_normalized).
CALL_PATHS = [
    pytest.param("positional"),
    pytest.param("keyword"),
]


def call(launcher, kernel, args, path):
    """Calls a configured launcher with `args` positionally or by parameter name."""
    if path == "positional":
        return launcher(*args)
    names = [p.name for p in kernel.params]
    assert len(args) <= len(names)
    return launcher(**dict(zip(names, args)))


#: A templated 2-D copy through cj::Array, shared by the compile and launch tests.
COPY2D = r"""
template <typename T>
__global__ void copy2d(cj::Array<T, 2> out, cj::Array<const T, 2> x) {
  long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0) && j < x.size(1)) out(i, j) = x(i, j);
}
"""


# -- example programs --------------------------------------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def example_binary(example: str, program: str, env_var: str) -> str:
    """The newest build of an examples/ program: `env_var` when set, else the CMake trees under
    build/. A GPU machine runs the CMake build before the tests (scripts/test.sh,
    gpu_check.sh), so a missing program fails the calling test rather than skipping it."""
    found = os.environ.get(env_var) or next(iter(sorted(
        glob.glob(os.path.join(REPO, "build", "*", "examples", example, program)),
        key=os.path.getmtime, reverse=True)), None)
    assert found is not None, (f"examples/{example} is not built: run the CMake build of "
                               f"scripts/test.sh, or set {env_var} to the program")
    return found


def run_cpp_example(example: str, script: str, program: str, env_var: str, folder,
                    files: list, script_timeout: int = 300):
    """Runs examples/<example>/<script> with Python (it writes `files` into `folder`), then the
    example's C++ program on them in a process with neither Python nor libclang on its paths:
    what it loads must carry the kernels' reflection. Returns the program's CompletedProcess."""
    binary = example_binary(example, program, env_var)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, os.path.join(REPO, "examples", example, script), str(folder)],
                   check=True, env=env, timeout=script_timeout)
    return subprocess.run([binary] + [os.path.join(str(folder), f) for f in files],
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in env.items()
                               if k not in ("PYTHONPATH", "TORCH_CUDAJIT_LIBCLANG")})


#: cuRAND's device API with the state type a template parameter (test_whole_file*.py): `init`
#: seeds one state per thread, `draw` writes one uniform number per thread.
CURAND_SOURCE = r"""#include <curand_kernel.h>
template <typename State>
__global__ void init(State* states, unsigned long long seed, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) curand_init(seed, i, 0, &states[i]);
}
template <typename State>
__global__ void draw(State* states, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = curand_uniform(&states[i]);
}
"""


#: Other libraries' complex types as kernel parameters (test_whole_file*.py): a short CuPy-style
#: thrust::complex (real(), imag(), laid out as (re, im)) and cuda::std::complex.
COMPLEX_SOURCE = r"""#include <cuda/std/complex>
namespace thrust {
template <class T> struct alignas(2 * sizeof(T)) complex {
  T re, im;
  __device__ T real() const { return re; }
  __device__ T imag() const { return im; }
  __device__ complex operator*(complex o) const { return {re * o.re - im * o.im, re * o.im + im * o.re}; }
};
}
__global__ void t(thrust::complex<double>* x, const thrust::complex<double>* y, thrust::complex<double> a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = y[i] * a;
}
__global__ void s(cuda::std::complex<float>* x, cuda::std::complex<float> a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""


def has_header(name: str) -> bool:
    """Whether a CUDA header is in the folders NVRTC searches (the toolkit's, or NVIDIA's wheels',
    which hold fewer: no cuRAND headers come with torch)."""
    return any(os.path.exists(os.path.join(d, name)) for d in _C.default_include_dirs())


#: Skips a test that needs cuRAND's device headers.
needs_curand = pytest.mark.skipif(not has_header("curand_kernel.h"),
                                  reason="needs cuRAND's headers (curand_kernel.h)")
#: Skips a test that needs CUDA's device runtime library (libcudadevrt.a).
needs_cudadevrt = pytest.mark.skipif(not _C.cudadevrt_library(),
                                     reason="needs CUDA's device runtime library (libcudadevrt.a)")
