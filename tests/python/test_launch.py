"""Launching kernels on a GPU. Every test here is marked ``gpu`` (skipped without one).

Inputs are random and never zero; outputs are poisoned (NaN, an integer maximum, or the negated
expectation for bool) before each launch, and checked against torch references, including that
nothing outside a strided output view was written.
"""
import enum
import struct

import pytest
import torch

import torch_cudajit as tcj
from _support import (COPY2D, CALL_PATHS, COMPLEX_DTYPES, DTYPE_NAMES, FLOAT_DTYPES, INPUT_LAYOUTS_2D,
                      LAYOUTS_2D, PoisonedOutput, assert_raises, blocks, call, dtype_params,
                      make_input, poison_, random_values)

pytestmark = pytest.mark.gpu

SLEEP_CYCLES = 200_000_000  # ~0.1 s of GPU time: keeps a stream busy while the host enqueues more

# -- kernels --------------------------------------------------------------------------------------

SCALE2D = r"""
template <typename T>
__global__ void scale2d(cj::Array<T, 2> out, cj::Array<const T, 2> x, T s) {
  long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0) && j < x.size(1)) out(i, j) = x(i, j) * s;
}
"""

SCALE_PTR = r"""
template <typename T>
__global__ void scale_ptr(T* out, const T* x, T s, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * s;
}
"""

SAXPY = r"""
template <typename T>
__global__ void saxpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
"""

SHAPE = (37, 53)  # not a multiple of any block size used
BLOCK2D = (16, 8)


def grid2d(shape, block=BLOCK2D):
    return (blocks(shape[1], block[0]), blocks(shape[0], block[1]))


@pytest.fixture(scope="module")
def copy2d():
    return tcj.jit(COPY2D)


@pytest.fixture(scope="module")
def scale2d():
    return tcj.jit(SCALE2D)


@pytest.fixture(scope="module")
def scale_ptr():
    return tcj.jit(SCALE_PTR)


@pytest.fixture(scope="module")
def saxpy():
    return tcj.jit(SAXPY)


def scale_factor(dtype):
    """A Python scalar of the kind a kernel of this dtype takes."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return 3.0
    return 3


def scaled(x, s):
    return x & s if x.dtype == torch.bool else x * s


# -- elementwise kernels over every dtype and layout ------------------------------------------------

@pytest.mark.parametrize("out_layout", LAYOUTS_2D)
@pytest.mark.parametrize("x_layout", INPUT_LAYOUTS_2D)
@pytest.mark.parametrize("dtype", dtype_params())
def test_copy2d(copy2d, dtype, x_layout, out_layout, device):
    x, ref = make_input(SHAPE, dtype, x_layout, device)
    out = PoisonedOutput(SHAPE, dtype, out_layout, device, expected=ref)
    copy2d[grid2d(SHAPE), BLOCK2D](out.view, x)
    out.check(ref)
    name = DTYPE_NAMES[dtype]
    flag = lambda layout: "contiguous" if layout == "contiguous" else "strided"  # noqa: E731
    assert f"(Array<{name}, 2, {flag(out_layout)}>, Array<const {name}, 2, {flag(x_layout)}>)" in copy2d.signatures


@pytest.mark.parametrize("x_layout", INPUT_LAYOUTS_2D)
@pytest.mark.parametrize("dtype", dtype_params())
def test_scale2d(scale2d, dtype, x_layout, device):
    x, ref = make_input(SHAPE, dtype, x_layout, device)
    s = scale_factor(dtype)
    expected = scaled(ref, s)
    out = PoisonedOutput(SHAPE, dtype, "contiguous", device, expected=expected)
    scale2d[grid2d(SHAPE), BLOCK2D](out.view, x, s)
    out.check(expected, exact=dtype not in FLOAT_DTYPES + COMPLEX_DTYPES)


@pytest.mark.parametrize("layout", ["1d", "offset", "2d"])
@pytest.mark.parametrize("dtype", dtype_params())
def test_scale_pointer_kernel(scale_ptr, dtype, layout, device):
    n = 1000
    if layout == "2d":
        x, ref = make_input((40, 25), dtype, "contiguous", device)
        out = PoisonedOutput((40, 25), dtype, "contiguous", device, expected=scaled(ref, scale_factor(dtype)))
        view, full, lo = out.view, out.base, 0
    else:
        lo = 7 if layout == "offset" else 0  # a contiguous view with a storage offset
        xb = random_values((n + 2 * lo,), dtype, device)
        x, ref = xb[lo:lo + n], xb[lo:lo + n].clone()
        full = torch.empty(n + 2 * lo, dtype=dtype, device=device)
        poison_(full)
        view = full[lo:lo + n]
        poison_(view, scaled(ref, scale_factor(dtype)))
    before = full.clone()
    s = scale_factor(dtype)
    scale_ptr[blocks(x.numel(), 128), 128](view, x, s, x.numel())
    exact = dtype not in FLOAT_DTYPES + COMPLEX_DTYPES
    kw = dict(rtol=0, atol=0) if exact else {}
    torch.testing.assert_close(view, scaled(ref, s), **kw)
    if lo:
        torch.testing.assert_close(full[:lo], before[:lo], rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(full[lo + n:], before[lo + n:], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("cpp, dtype", [("float", torch.float32), ("double", torch.float64)])
def test_plain_pointer_kernel(cpp, dtype, device):
    k = tcj.jit(f"""
__global__ void add_one(float_t_* out, const float_t_* x, int64_t n) {{
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + 1;
}}""".replace("float_t_", cpp))
    n = 5000
    x = random_values((n,), dtype, device)
    out = torch.full((n,), float("nan"), dtype=dtype, device=device)
    k[blocks(n, 256), 256](out, x, n)
    torch.testing.assert_close(out, x + 1, rtol=0, atol=0)
    assert k.signatures == [f"({DTYPE_NAMES[dtype]}*, const {DTYPE_NAMES[dtype]}*, int)"]


def test_rank4_permuted_copy(device):
    k = tcj.jit(r"""
template <typename T>
__global__ void copy4d(cj::Array<T, 4> out, cj::Array<const T, 4> x) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= x.numel()) return;
  long long i3 = t % x.size(3), r = t / x.size(3);
  long long i2 = r % x.size(2); r /= x.size(2);
  long long i1 = r % x.size(1), i0 = r / x.size(1);
  out(i0, i1, i2, i3) = x(i0, i1, i2, i3);
}""")
    base = random_values((3, 5, 7, 4), torch.float64, device)
    x = base.permute(2, 0, 3, 1)  # shape (7, 3, 4, 5), strided
    out_base = torch.full((5, 4, 3, 7), float("nan"), dtype=torch.float64, device=device)
    out = out_base.permute(3, 2, 1, 0)  # shape (7, 3, 4, 5), strided too
    k[blocks(x.numel(), 64), 64](out, x)
    torch.testing.assert_close(out, x, rtol=0, atol=0)


def test_rank0_array_and_auto_kernel(device):
    k0 = tcj.jit("__global__ void set0(cj::Array<float, 0> out, float v) { out() = v; }")
    out = torch.full((), float("nan"), device=device)
    k0[1, 1](out, 2.5)
    assert out.item() == 2.5

    ka = tcj.jit(r"""
__global__ void auto_scale(auto out, auto x, float s) {
  long long i = blockIdx.y * blockDim.y + threadIdx.y;
  long long j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0) && j < x.size(1)) out(i, j) = x(i, j) * s;
}""")
    x, ref = make_input(SHAPE, torch.float32, "transposed", device)
    out = PoisonedOutput(SHAPE, torch.float32, "sliced", device)
    ka[grid2d(SHAPE), BLOCK2D](out.view, x, 0.5)
    out.check(ref * 0.5)


def test_extern_c_kernel(device):
    k = tcj.jit(r"""extern "C" __global__ void neg(cj::Array<float, 1> out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -x[i];
}""")
    n = 300
    x = random_values((n,), torch.float32, device)
    out_base = torch.full((2 * n,), float("nan"), device=device)
    k[blocks(n, 64), 64](out_base[::2], x, n)
    torch.testing.assert_close(out_base[::2], -x, rtol=0, atol=0)
    assert out_base[1::2].isnan().all()


def test_module_kernels_launch(device):
    m = tcj.jit(r"""
__global__ void twice(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 2 * x[i];
}
__global__ void thrice(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 3 * x[i];
}""")
    n = 1000
    x = random_values((n,), torch.float32, device)
    a = torch.full_like(x, float("nan"))
    b = torch.full_like(x, float("nan"))
    m.twice[blocks(n, 128), 128](a, x, n)
    m["thrice"][blocks(n, 128), 128](b, x, n)
    torch.testing.assert_close(a, 2 * x)
    torch.testing.assert_close(b, 3 * x)


# -- scalars ----------------------------------------------------------------------------------------

SAXPY_CASES = [
    (torch.float32, 2.5), (torch.float32, 3), (torch.float32, True),
    (torch.float64, -0.75), (torch.float64, 4),
    (torch.float16, 1.5), (torch.bfloat16, 2),
    (torch.int32, 3), (torch.int64, -2), (torch.int8, 2), (torch.int16, -3), (torch.uint8, 3),
    (torch.complex64, 2.5), (torch.complex128, -2),
]


@pytest.mark.parametrize("dtype, a", [pytest.param(d, a, id=f"{DTYPE_NAMES[d]}-{a!r}") for d, a in SAXPY_CASES])
def test_saxpy_python_scalars(saxpy, dtype, a, device):
    n = 777
    x = random_values((n,), dtype, device)
    out = torch.empty_like(x)
    poison_(out)
    saxpy[blocks(n, 128), 128](out, x, a)
    expected = x * a
    exact = dtype not in FLOAT_DTYPES + COMPLEX_DTYPES
    torch.testing.assert_close(out, expected, **(dict(rtol=0, atol=0) if exact else {}))


def test_saxpy_python_complex_on_complex128(saxpy, device):
    n = 500
    x = random_values((n,), torch.complex128, device)
    out = torch.full_like(x, complex("nan+nanj"))
    saxpy[blocks(n, 128), 128](out, x, 1.5 - 2j)
    torch.testing.assert_close(out, x * (1.5 - 2j))


def test_saxpy_python_complex_on_complex64(saxpy, device):
    n = 500
    x = random_values((n,), torch.complex64, device)
    out = torch.full_like(x, complex("nan+nanj"))
    saxpy[blocks(n, 128), 128](out, x, 1.5 - 2j)
    torch.testing.assert_close(out, x * (1.5 - 2j))


@pytest.mark.parametrize("dtype, scalar", [
    pytest.param(torch.float32, lambda d: torch.tensor(2.5, device=d), id="f32-tensor-to-float"),
    pytest.param(torch.float32, lambda d: torch.tensor(-1.25, dtype=torch.float64, device=d), id="f64-tensor-to-float"),
    pytest.param(torch.float64, lambda d: torch.tensor(3, device=d), id="i64-tensor-to-double"),
    pytest.param(torch.int32, lambda d: torch.tensor(-4, device=d), id="i64-tensor-to-int"),
    pytest.param(torch.complex128, lambda d: torch.tensor(1 - 1j, dtype=torch.complex128, device=d), id="c128"),
])
def test_0d_tensor_as_scalar(saxpy, dtype, scalar, device):
    n = 300
    x = random_values((n,), dtype, device)
    a = scalar(device)
    out = torch.empty_like(x)
    poison_(out)
    saxpy[blocks(n, 64), 64](out, x, a)
    expected = x * a.to(dtype)
    torch.testing.assert_close(out, expected, **({} if dtype.is_floating_point or dtype.is_complex
                                                 else dict(rtol=0, atol=0)))


@pytest.mark.parametrize("dtype, make", [
    pytest.param(torch.float32, lambda np: np.float32(2.5), id="np.float32"),
    pytest.param(torch.float32, lambda np: np.float64(-0.5), id="np.float64"),
    pytest.param(torch.float32, lambda np: np.float16(1.5), id="np.float16"),
    pytest.param(torch.float32, lambda np: np.int64(3), id="np.int64-to-float"),
    pytest.param(torch.int32, lambda np: np.int32(-3), id="np.int32"),
    pytest.param(torch.int64, lambda np: np.uint8(7), id="np.uint8"),
    pytest.param(torch.int32, lambda np: np.bool_(True), id="np.bool_"),
    pytest.param(torch.complex128, lambda np: np.complex128(1 + 2j), id="np.complex128"),
])
def test_numpy_scalars(saxpy, dtype, make, device):
    np = pytest.importorskip("numpy")
    a = make(np)
    n = 300
    x = random_values((n,), dtype, device)
    out = torch.empty_like(x)
    poison_(out)
    saxpy[blocks(n, 64), 64](out, x, a)
    torch.testing.assert_close(out, x * a.item(), **({} if dtype.is_floating_point or dtype.is_complex
                                                     else dict(rtol=0, atol=0)))


class Factor(enum.IntEnum):
    THREE = 3
    MINUS_TWO = -2


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
@pytest.mark.parametrize("factor", list(Factor), ids=lambda f: f.name)
def test_int_enum_argument(saxpy, scale_ptr, dtype, factor, device):
    n = 400
    x = random_values((n,), dtype, device)
    out = torch.empty_like(x)
    poison_(out)
    saxpy[blocks(n, 64), 64](out, x, factor)
    torch.testing.assert_close(out, x * int(factor), rtol=0, atol=0)
    # an IntEnum as an int64_t element count too
    poison_(out)
    scale_ptr[blocks(n, 64), 64](out, x, factor, Factor.THREE)
    torch.testing.assert_close(out[:3], x[:3] * int(factor), rtol=0, atol=0)
    assert (out[3:] != out[3:]).all() if dtype.is_floating_point else (out[3:] == torch.iinfo(dtype).max).all()


STORE_INTS = r"""
__global__ void store_ints(int64_t* out, int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e,
                           uint32_t f, int64_t g, uint64_t h, bool p) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = f; out[6] = g;
  out[7] = (int64_t)h; out[8] = p ? 11 : 22;
}
"""


@pytest.mark.parametrize("values", [
    pytest.param((-128, 0, -32768, 0, -2**31, 0, -2**63, 0, False), id="minimum"),
    pytest.param((127, 255, 32767, 65535, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, True), id="maximum"),
    pytest.param((-5, 7, 300, 4000, -70000, 3_000_000_000, 2**40, 2**63, 1), id="mixed"),
])
def test_integer_parameters_are_packed_exactly(values, device):
    k = tcj.jit(STORE_INTS)
    out = torch.full((9,), -1234567, dtype=torch.int64, device=device)
    k[1, 1](out, *values)
    expected = list(values[:7]) + [values[7] - 2**64 if values[7] >= 2**63 else values[7],
                                   11 if values[8] else 22]
    assert out.tolist() == expected


STORE_FLOATS = r"""
__global__ void store_floats(double* out, __half a, __nv_bfloat16 b, float c, double d,
                             cj::complex<double> e) {
  out[0] = __half2float(a); out[1] = __bfloat162float(b); out[2] = c; out[3] = d;
  out[4] = e.real(); out[5] = e.imag();
}
"""


def test_floating_parameters_are_packed_exactly(device):
    k = tcj.jit("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + STORE_FLOATS)
    out = torch.full((6,), float("nan"), dtype=torch.float64, device=device)
    k[1, 1](out, 1.5, -2.25, 1 / 3, 1 / 3, 0.25 - 8j)
    assert out.tolist() == [1.5, -2.25, float(torch.tensor(1 / 3, dtype=torch.float32)), 1 / 3, 0.25, -8.0]
    k[1, 1](out, 3, True, -7, 2**53, 5)  # Python ints and bools into floating parameters
    assert out.tolist() == [3.0, 1.0, -7.0, float(2**53), 5.0, 0.0]


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_bool_tensors_and_bool_scalar(invert, layout, device):
    k = tcj.jit(r"""
__global__ void logic(cj::Array<bool, 1> out, cj::Array<const bool, 1> a, cj::Array<const bool, 1> b,
                      bool invert) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < out.size(0)) { bool v = a[i] && !b[i]; out[i] = invert ? !v : v; }
}""")
    n = 1001
    if layout == "contiguous":
        a, b = random_values((n,), torch.bool, device), random_values((n,), torch.bool, device)
    else:
        a, b = random_values((2 * n,), torch.bool, device)[::2], random_values((3 * n,), torch.bool, device)[1::3]
    expected = a & ~b
    if invert:
        expected = ~expected
    out = torch.empty(n, dtype=torch.bool, device=device)
    poison_(out, expected)
    k[blocks(n, 128), 128](out, a, b, invert)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


# -- launch forms -------------------------------------------------------------------------------------

@pytest.mark.parametrize("grid, block", [
    pytest.param(lambda n: blocks(n, 128), 128, id="ints"),
    pytest.param(lambda n: (blocks(n, 128),), (128,), id="tuples"),
    pytest.param(lambda n: [blocks(n, 128)], [128], id="lists"),
    pytest.param(lambda n: (blocks(n, 128), 1, 1), (128, 1, 1), id="3d"),
])
def test_grid_and_block_forms(saxpy, grid, block, device):
    n = 1000
    x = random_values((n,), torch.float32, device)
    for attempt in range(2):  # the second launch takes the cached launcher
        out = torch.full_like(x, float("nan"))
        saxpy[grid(n), block](out, x, 2.0)
        torch.testing.assert_close(out, 2 * x)


# -- autograd bookkeeping of written tensors ----------------------------------------------


@pytest.mark.parametrize("kind", ["array", "pointer", "specialized"])
def test_launch_counts_writes_and_refuses_grad_tensors(saxpy, scale_ptr, kind, device):
    n = 1000
    x = random_values((n,), torch.float32, device)
    if kind == "pointer":
        launch = lambda out: scale_ptr[blocks(n, 128), 128](out, x, 2.0, n)  # noqa: E731
    else:
        k = saxpy.specialize(x, x, 2.0) if kind == "specialized" else saxpy
        launch = lambda out: k[blocks(n, 128), 128](out, x, 2.0)  # noqa: E731
    out = poison_(torch.empty_like(x))
    before = (out._version, x._version)
    launch(out)
    # One write counted; x binds a const parameter, so it is read only.
    assert (out._version, x._version) == (before[0] + 1, before[1])
    torch.testing.assert_close(out, 2 * x)

    leaf = poison_(torch.empty_like(x)).requires_grad_()
    with pytest.raises(RuntimeError, match="writes parameter 'out', a tensor that requires "
                                           "grad; kernels have no derivative"):
        launch(leaf)
    with torch.no_grad():  # initialising a parameter in place, as torch allows
        launch(leaf)
    torch.testing.assert_close(leaf.detach(), 2 * x)


def test_overwriting_a_saved_tensor_fails_backward_like_torch(saxpy, device):
    n = 1000
    w = random_values((n,), torch.float32, device).requires_grad_()
    x = random_values((n,), torch.float32, device)
    y = (w * x).sum()  # saves x for w's gradient
    saxpy[blocks(n, 128), 128](x, random_values((n,), torch.float32, device), 2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def _busy_stream_then_fill(stream, x, values):
    """Enqueues on `stream` a ~0.1 s sleep followed by x.copy_(values): a kernel that reads x
    sees `values` only if it runs on `stream` after them."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(values)


@pytest.mark.parametrize("as_handle", [False, True], ids=["torch-stream", "raw-handle"])
def test_launch_on_explicit_stream(saxpy, as_handle, device):
    n = 1 << 16
    new = random_values((n,), torch.float32, device)
    x = torch.full((n,), float("nan"), device=device)
    out = torch.full_like(x, float("nan"))
    saxpy[blocks(n, 256), 256](out, x, 2.0)  # compile and load first: the launch below is immediate
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    _busy_stream_then_fill(s, x, new)
    saxpy[blocks(n, 256), 256, s.cuda_stream if as_handle else s](out, x, 2.0)
    s.synchronize()  # the kernel ran on s: synchronizing s alone completes it
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    torch.testing.assert_close(out, 2 * new)


def test_current_stream_is_honoured(saxpy, device):
    n = 1 << 16
    new = random_values((n,), torch.float32, device)
    x = torch.full((n,), float("nan"), device=device)
    out = torch.full_like(x, float("nan"))
    launcher = saxpy[blocks(n, 256), 256]
    launcher(out, x, 2.0)  # compile, load, and cache the launcher outside the stream context
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    _busy_stream_then_fill(s, x, new)
    with torch.cuda.stream(s):
        launcher(out, x, 2.0)  # no stream given: the current stream, s, at launch time
    s.synchronize()
    torch.testing.assert_close(out, 2 * new)


TRANSPOSE = r"""
__global__ void transpose(cj::Array<float, 2> out, cj::Array<const float, 2> x) {
  extern __shared__ float tile[];  // blockDim.y x blockDim.x, with blockDim.x == blockDim.y
  long long r = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r < x.size(0) && c < x.size(1)) tile[threadIdx.y * blockDim.x + threadIdx.x] = x(r, c);
  __syncthreads();
  long long orow = (long long)blockIdx.x * blockDim.x + threadIdx.y;
  long long ocol = (long long)blockIdx.y * blockDim.y + threadIdx.x;
  if (orow < out.size(0) && ocol < out.size(1))
    out(orow, ocol) = tile[threadIdx.x * blockDim.x + threadIdx.y];
}
"""


@pytest.mark.parametrize("tile", [8, 16, 32])
def test_dynamic_shared_memory(tile, device):
    k = tcj.jit(TRANSPOSE)
    h, w = 45, 70
    x = random_values((h, w), torch.float32, device)
    out = torch.full((w, h), float("nan"), device=device)
    k[(blocks(w, tile), blocks(h, tile)), (tile, tile), None, tile * tile * 4](out, x)
    torch.testing.assert_close(out, x.t(), rtol=0, atol=0)


def test_dynamic_shared_memory_above_48k(device):
    k = tcj.jit(r"""
__global__ void big_shared(float* out, int64_t nshared) {
  extern __shared__ float buf[];
  for (int64_t k = threadIdx.x; k < nshared; k += blockDim.x) buf[k] = (float)k;
  __syncthreads();
  out[threadIdx.x] = buf[nshared - 1 - threadIdx.x];
}""")
    optin = torch.cuda.get_device_properties(device).shared_memory_per_block_optin
    nbytes = min(200 * 1024, optin)
    if nbytes <= 48 * 1024:
        pytest.skip("this device has no more than 48 KiB of shared memory per block")
    nshared = nbytes // 4
    out = torch.full((256,), float("nan"), device=device)
    k[1, 256, None, nbytes](out, nshared)
    expected = torch.arange(nshared - 1, nshared - 257, -1, dtype=torch.float32, device=device)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_launch_on_another_device_than_the_current(saxpy, two_gpus):
    d0, d1 = two_gpus
    n = 1000
    for data_dev, current in ((d0, 1), (d1, 0)):
        x = random_values((n,), torch.float32, data_dev)
        out = torch.full_like(x, float("nan"))
        with torch.cuda.device(current):
            saxpy[blocks(n, 128), 128](out, x, 2.0)
            assert torch.cuda.current_device() == current  # the launch restores the current device
        torch.cuda.synchronize(data_dev)
        torch.testing.assert_close(out, 2 * x)


@pytest.mark.parametrize("n", [1, 31, 1000, 1025, 100_003])
def test_forall(saxpy, n, device):
    x = random_values((n,), torch.float32, device)
    full = torch.full((n + 64,), float("nan"), device=device)
    out = full[:n]
    saxpy.forall(n)(out, x, 2.0)
    torch.testing.assert_close(out, 2 * x)
    assert full[n:].isnan().all(), "wrote past n"
    full.fill_(float("nan"))
    saxpy.forall(n)(out=out, x=x, a=-1.0)  # keywords
    torch.testing.assert_close(out, -x)


def test_forall_on_a_stream(saxpy, device):
    n = 5000
    x = random_values((n,), torch.float32, device)
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    saxpy.forall(n, stream=s)(out, x, 3.0)
    s.synchronize()
    torch.testing.assert_close(out, 3 * x)


def test_keyword_arguments(saxpy, device):
    n = 1000
    x = random_values((n,), torch.float32, device)
    for call_ in (lambda o: saxpy[blocks(n, 128), 128](out=o, x=x, a=2.0),
                  lambda o: saxpy[blocks(n, 128), 128](a=2.0, x=x, out=o),
                  lambda o: saxpy[blocks(n, 128), 128](o, a=2.0, x=x),
                  lambda o: saxpy[blocks(n, 128), 128](o, x, a=2.0)):
        out = torch.full_like(x, float("nan"))
        call_(out)
        torch.testing.assert_close(out, 2 * x)
    assert len(saxpy.signatures) >= 1


def test_signatures_grow_once_per_key_at_launch(device):
    k = tcj.jit(SAXPY)
    x = random_values((100,), torch.float32, device)
    out = torch.empty_like(x)
    for _ in range(3):
        k[1, 128](out, x, 2.0)
    assert len(k.signatures) == 1
    k[1, 128](out, x, 2)  # int scalar: a new key
    xd = x.double()
    k[1, 128](torch.empty_like(xd), xd, 2.0)  # float64: a new key
    k[1, 128](out, x, 2.0)
    assert len(k.signatures) == 3
    arch = 10 * torch.cuda.get_device_capability(device)[0] + torch.cuda.get_device_capability(device)[1]
    assert all(a == arch for _, a in k.overloads)


# -- specialize ---------------------------------------------------------------------------------------

def test_specialize(device):
    k = tcj.jit(SAXPY)
    x = random_values((1000,), torch.float32, device)
    out = torch.full_like(x, float("nan"))
    sk = k.specialize(out, x, 2.0)
    assert isinstance(sk, tcj.SpecializedKernel)
    assert sk.name == "saxpy"
    assert sk.signature == "(Array<float32, 1, contiguous>, Array<const float32, 1, contiguous>, float)"
    assert isinstance(sk.compiled, tcj.CompiledKernel) and sk.compiled.signature == sk.signature
    assert sk.signature in repr(sk)
    # same signature, other tensors and values
    x2 = random_values((333,), torch.float32, device)
    out2 = torch.full_like(x2, float("nan"))
    sk[blocks(333, 64), 64](out2, x2, -3.0)
    torch.testing.assert_close(out2, -3 * x2)
    sk[blocks(333, 64), 64](out=out2, x=x2, a=0.5)
    torch.testing.assert_close(out2, 0.5 * x2)
    sk.forall(333)(out2, x2, 4.0)
    torch.testing.assert_close(out2, 4 * x2)
    assert k.signatures == [sk.signature]


@pytest.mark.parametrize("path", CALL_PATHS)
@pytest.mark.parametrize("other", [
    pytest.param(lambda x: (x.double(), x.double(), 2.0), id="dtype"),
    pytest.param(lambda x: (x.clone(), x[::2], 2.0), id="layout"),
    pytest.param(lambda x: (x.clone(), x, 2), id="scalar-kind"),
])
def test_specialized_kernel_rejects_another_signature(path, other, device):
    k = tcj.jit(SAXPY)
    x = random_values((100,), torch.float32, device)
    sk = k.specialize(torch.empty_like(x), x, 2.0)
    args = other(x)
    if args[0].shape != args[1].shape:
        args = (torch.empty_like(args[1]),) + args[1:]
    assert_raises(TypeError, r"this specialized kernel 'saxpy' is fixed to \(Array<float32, 1, contiguous>, "
                             r"Array<const float32, 1, contiguous>, float\) but got \(",
                  call, sk[1, 128], k, args, path)


# -- foreign arrays ----------------------------------------------------------------------------------

def test_cupy_arrays_zero_copy(saxpy, device):
    cp = pytest.importorskip("cupy")
    n = 1000
    x_t = random_values((n,), torch.float32, device)
    x = cp.asarray(x_t.cpu().numpy())
    out = cp.full((n,), cp.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    saxpy[blocks(n, 128), 128](out, x, 2.0)
    torch.cuda.synchronize()
    # the kernel wrote into the CuPy array's own memory
    torch.testing.assert_close(torch.as_tensor(cp.asnumpy(out)), 2 * x_t.cpu())
    # a strided CuPy view keeps its strides
    out2 = cp.full((2 * n,), cp.nan, dtype=cp.float32)
    saxpy[blocks(n, 128), 128](out2[::2], x, 3.0)
    torch.cuda.synchronize()
    got = torch.as_tensor(cp.asnumpy(out2))
    torch.testing.assert_close(got[::2], 3 * x_t.cpu())
    assert got[1::2].isnan().all()


def test_cupy_stream(saxpy, device):
    cp = pytest.importorskip("cupy")
    n = 1000
    x = random_values((n,), torch.float32, device)
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    saxpy[blocks(n, 128), 128, s](out, x, 2.0)
    s.synchronize()
    torch.testing.assert_close(out, 2 * x)


# -- extensions ---------------------------------------------------------------------------------------

class Pair:
    """A user object that holds two tensors."""

    def __init__(self, a, b):
        self.a, self.b = a, b


class PairExtension(tcj.Extension):
    def __init__(self):
        self.seen = []  # (type of value, parameter name, stream) per prepare_args call
        self.after = []  # what the retr callbacks saw

    def prepare_args(self, value, *, param, stream, retr):
        self.seen.append((type(value).__name__, param.name if param is not None else None, stream))
        if isinstance(value, Pair):
            out = self._out

            def snapshot():
                # Ordered after the kernel only if the callback runs after the launch.
                if stream is not None:
                    torch.cuda.ExternalStream(stream).synchronize()
                self.after.append(out.clone())

            retr.append(snapshot)
            return tcj.Params(value.a, value.b)
        if isinstance(value, torch.Tensor) and value.dim() == 1 and param is not None and param.name == "out":
            self._out = value
        return value


ADD_PAIR = r"""
__global__ void add_pair(cj::Array<float, 1> out, cj::Array<const float, 1> a, cj::Array<const float, 1> b,
                         float s) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = s * (a[i] + b[i]);
}
"""


@pytest.mark.parametrize("use_stream", [False, True], ids=["current-stream", "explicit-stream"])
def test_extension_expands_a_user_object(use_stream, device):
    ext = PairExtension()
    k = tcj.jit(ADD_PAIR, extensions=[ext])
    n = 1000
    a, b = random_values((n,), torch.float32, device), random_values((n,), torch.float32, device)
    out = torch.full((n,), float("nan"), device=device)
    s = torch.cuda.current_stream() if not use_stream else torch.cuda.Stream()
    if use_stream:
        s.wait_stream(torch.cuda.current_stream())
        k[blocks(n, 128), 128, s](out, Pair(a, b), 2.0)
        s.synchronize()
    else:
        k[blocks(n, 128), 128](out, Pair(a, b), 2.0)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * (a + b))
    handle = s.cuda_stream if use_stream else None
    assert ext.seen == [("Tensor", "out", handle), ("Pair", "a", handle), ("float", "s", handle)]
    # the retr callback ran after the launch: the snapshot it took already holds the result
    assert len(ext.after) == 1
    torch.testing.assert_close(ext.after[0], 2 * (a + b))


def test_extension_passes_other_arguments_through(device):
    ext = PairExtension()
    k = tcj.jit(ADD_PAIR, extensions=[ext])
    n = 100
    a, b = random_values((n,), torch.float32, device), random_values((n,), torch.float32, device)
    out = torch.full((n,), float("nan"), device=device)
    k[1, 128](out, a, b, 1.0)  # no Pair: the extension returns every value unchanged
    torch.testing.assert_close(out, a + b)
    assert [t for t, _, _ in ext.seen] == ["Tensor", "Tensor", "Tensor", "float"]
    assert ext.after == []


class AffineParams:
    def __init__(self, scale, shift):
        self.scale, self.shift = scale, shift


class AffineExtension(tcj.Extension):
    """Packs an AffineParams into the bytes of the kernel's `struct Affine`."""

    def prepare_args(self, value, *, param, stream, retr):
        if isinstance(value, AffineParams):
            assert param.type == "Affine"
            return struct.pack("ff", value.scale, value.shift)
        return value


def test_extension_packs_a_struct(device):
    k = tcj.jit(r"""struct Affine { float scale; float shift; };
__global__ void affine(cj::Array<float, 1> out, cj::Array<const float, 1> x, Affine p) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = x[i] * p.scale + p.shift;
}""", extensions=[AffineExtension()])
    n = 1000
    x = random_values((n,), torch.float32, device)
    out = torch.full_like(x, float("nan"))
    k[blocks(n, 128), 128](out, x, AffineParams(2.0, -0.5))
    torch.testing.assert_close(out, x * 2.0 - 0.5)


# -- CUDA graphs ------------------------------------------------------------------------------------

def test_cuda_graph_capture_and_replay(saxpy, device):
    n = 4096
    static_x = random_values((n,), torch.float32, device)
    static_out = torch.full_like(static_x, float("nan"))
    launcher = saxpy[blocks(n, 256), 256]
    # warm up (compile and load) on a side stream, as torch.cuda.graphs recommends
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launcher(static_out, static_x, 2.0)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launcher(static_out, static_x, 2.0)  # launches on the current (capturing) stream
    for _ in range(3):
        new = random_values((n,), torch.float32, device)
        static_x.copy_(new)
        static_out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, 2 * new)


def test_cuda_graph_with_two_kernels(device):
    m = tcj.jit(r"""
__global__ void add_one(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] + 1.0f;
}
__global__ void square(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] * x[i];
}""")
    n = 3000
    x = random_values((n,), torch.float32, device)
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    grid = blocks(n, 128)
    m.add_one[grid, 128](tmp, x, n)
    m.square[grid, 128](out, tmp, n)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        m.add_one[grid, 128](tmp, x, n)
        m.square[grid, 128](out, tmp, n)
    new = random_values((n,), torch.float32, device)
    x.copy_(new)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, (new + 1) ** 2)
