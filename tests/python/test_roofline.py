"""Layout properties in the key (16-byte alignment, 32-bit indexability), the device helpers
(Array::load/store, cj::for_each, cj::elementwise) and forall's launch shape. CPU tests compile
for sm_90 and read the PTX; GPU tests check results against torch."""
from __future__ import annotations

import math
import re
import warnings

import pytest
import torch

import torch_cudajit as cj
from _support import FLOAT_DTYPES, README_AXPY, forall_axpy, poison_, random_values

AXPY = r"""
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, float a) {
  cj::elementwise(out, [=](T xi, T yi) { return T(a * float(xi) + float(yi)); }, x, y);
}
"""

ROWSUM_2D = r"""
template <typename T>
__global__ void add2d(cj::Array<T, 2> out, cj::Array<const T, 2> x, cj::Array<const T, 2> y) {
  cj::elementwise(out, [](T a, T b) { return T(a + b); }, x, y);
}
"""

VEC = r"""
__global__ void scale4(cj::Array<float, 1> out, cj::Array<const float, 1> x, float a) {
  long long i = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (i + 3 < x.size(0)) {
    cj::Vec<float, 4> v = x.load<4>(i);
    for (int k = 0; k < 4; ++k) v[k] *= a;
    out.store<4>(i, v);
  }
}
"""

README = README_AXPY

RUNS = r"""
template <typename T>
__global__ void axpy_runs(cj::Array<T, 3> out, cj::Array<const T, 3> x, cj::Array<const T, 3> y, float a) {
  cj::for_each_run<8>(out, [&](long long i, const long long (&at)[3], int len) {
    const auto xv = x.template load_run<8>(x.offset_at(i, at), len);
    const auto yv = y.template load_run<8>(y.offset_at(i, at), len);
    cj::Vec<T, 8> r;
#pragma unroll
    for (int k = 0; k < 8; ++k) r[k] = T(a * float(xv[k]) + float(yv[k]));
    out.template store_run<8>(out.offset_at(i, at), r, len);
  });
}
"""


ALIGNED_RUNS = RUNS.replace("axpy_runs", "axpy_aligned_runs").replace(
    "load_run<8>(x.offset_at(i, at), len)", "load_aligned_run<8>(x.offset_at(i, at))").replace(
    "load_run<8>(y.offset_at(i, at), len)", "load_aligned_run<8>(y.offset_at(i, at))").replace(
    "store_run<8>(out.offset_at(i, at), r, len)", "store_aligned_run<8>(out.offset_at(i, at), r)")


def run_tasks(shape):
    """forall's task count for a for_each_run<8> kernel: a task per run of 8 along the last
    dimension."""
    return math.prod(shape[:-1]) * -(-shape[-1] // 8)


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def vector_loads(ptx):
    return len(re.findall(r"ld\.global(?:\.nc)?\.v\d\.", ptx))


# -- the key ------------------------------------------------------------------------------------


def test_alignment_and_index_width_are_in_the_key():
    k = cj.jit(AXPY)
    base = torch.randn(65)  # CPU tensors stand for their layout with arch=
    aligned, unaligned = base[:64], base[1:]
    assert aligned.data_ptr() % 16 == 0 and unaligned.data_ptr() % 16 != 0
    k.compile(aligned, aligned, aligned, 2.0, arch="sm_90")
    k.compile(unaligned, aligned, aligned, 2.0, arch="sm_90")
    huge = meta(2 ** 31 + 1)
    k.compile(huge, huge, huge, 2.0, arch="sm_90")
    assert k.signatures == [
        "(Array<float32, 1, contiguous>, Array<const float32, 1, contiguous>, "
        "Array<const float32, 1, contiguous>, float)",
        "(Array<float32, 1, contiguous, unaligned>, Array<const float32, 1, contiguous>, "
        "Array<const float32, 1, contiguous>, float)",
        "(Array<float32, 1, contiguous, 64-bit index>, Array<const float32, 1, contiguous, "
        "64-bit index>, Array<const float32, 1, contiguous, 64-bit index>, float)",
    ]


def test_strided_offsets_decide_the_index_width():
    k = cj.jit(ROWSUM_2D)
    # The same 2^30 elements; rows 2^31 elements apart put the farthest offset past 2^31.
    near = torch.empty_strided((2, 2 ** 29), (2 ** 29, 1), device="meta")
    far = torch.empty_strided((2, 2 ** 29), (2 ** 31, 1), device="meta")
    k.compile(near, near, near, arch="sm_90")
    k.compile(far, near, near, arch="sm_90")
    assert "64-bit index" not in k.signatures[0]
    assert k.signatures[1].startswith("(Array<float32, 2, strided, 64-bit index>, Array<const float32, 2, contiguous>")


@pytest.mark.parametrize("dtype, lanes", [(torch.float32, 4), (torch.float16, 8), (torch.bfloat16, 8),
                                          (torch.float64, 2)], ids=["float32", "float16", "bfloat16", "float64"])
def test_elementwise_vectorizes_aligned_contiguous_arrays(dtype, lanes):
    k = cj.jit(AXPY)
    x = torch.empty(64, dtype=dtype)
    ptx = k.compile(x, x, x, 2.0, arch="sm_90").ptx
    assert vector_loads(ptx) >= 2, ptx  # x and y as 16-byte vectors
    assert re.search(r"st\.global\.v\d\.", ptx)
    unaligned = torch.empty(65, dtype=dtype)[1:]
    ptx = k.compile(unaligned, x, x, 2.0, arch="sm_90").ptx
    assert vector_loads(ptx) == 0


def test_elementwise_strided_arrays_index_through_strides():
    k = cj.jit(ROWSUM_2D)
    t = torch.empty(8, 16).t()
    c = k.compile(t, t, t, arch="sm_90")
    assert "strided" in c.signature and vector_loads(c.ptx) == 0


def test_index32_uses_32_bit_offsets():
    k = cj.jit(README)
    small, big = meta(1024), meta(2 ** 31 + 8)
    ptx_small = k.compile(small, small, small, 2.0, arch="sm_90").ptx
    ptx_big = k.compile(big, big, big, 2.0, arch="sm_90").ptx
    # 64-bit offsets are multiplied with mul.wide or 64-bit mad/shl; 32-bit ones need only
    # the final widening of the byte offset.
    assert ptx_small != ptx_big
    assert ptx_small.count("mul.wide.s32") >= ptx_big.count("mul.wide.s32")


def test_load_store_compile_to_vector_accesses():
    k = cj.jit(VEC)
    x = torch.empty(64)
    ptx = k.compile(x, x, 2.0, arch="sm_90").ptx
    assert re.search(r"ld\.global(?:\.nc)?\.v4\.f32", ptx) and re.search(r"st\.global\.v4\.f32", ptx)
    unaligned = torch.empty(65)[1:]
    ptx = k.compile(unaligned, unaligned, 2.0, arch="sm_90").ptx
    assert not re.search(r"\.v4\.", ptx)


def test_load_of_a_strided_array_does_not_compile():
    k = cj.jit(VEC)
    with pytest.raises(cj.CompileError, match="cj::Array::load needs a contiguous array"):
        k.compile(torch.empty(64), torch.empty(128)[::2], 2.0, arch="sm_90")


@pytest.mark.parametrize("dtype, vector", [(torch.bfloat16, r"v4\.(?:b|u)32"), (torch.float32, r"v4\.f32")],
                         ids=str)
def test_runs_compile_to_vector_accesses_and_element_loops(dtype, vector):
    """A run's loads and stores are vector accesses where the last stride may be 1 (checked at
    run time, so strided arrays keep them too), beside the element loop for partial runs."""
    k = cj.jit(RUNS)
    t = torch.empty(4, 6, 24, device="meta", dtype=dtype)
    for x in (t, t.transpose(0, 1)):
        ptx = k.compile(t, x, t, 2.0, arch="sm_90").ptx
        assert re.search(r"ld\.global(?:\.nc)?\." + vector, ptx), ptx[-2000:]
        assert re.search(r"st\.global\." + vector, ptx)
    assert k._core.grid_strides
    # Debug mode compiles them too (run offsets are not checked, as with data()).
    assert cj.jit(RUNS, debug=True).compile(t, t, t, 2.0, arch="sm_90").ptx


@pytest.mark.parametrize("dtype, vector", [(torch.bfloat16, r"v4\.(?:b|u)32"), (torch.float32, r"v4\.f32")],
                         ids=str)
def test_aligned_runs_are_vector_accesses_alone_where_the_pointer_is_aligned(dtype, vector):
    """load_aligned_run and store_aligned_run: only vector accesses (no element loop, no check
    of the stride) with 16-byte aligned data, only element accesses without."""
    k = cj.jit(ALIGNED_RUNS)
    t = torch.empty(4, 6, 24, dtype=dtype)
    ptx = k.compile(t, t.transpose(0, 1).contiguous().transpose(0, 1), t, 2.0, arch="sm_90").ptx
    assert re.search(r"ld\.global(?:\.nc)?\." + vector, ptx) and re.search(r"st\.global\." + vector, ptx)
    scalar = r"(?:ld|st)\.global(?:\.nc)?\.(?:b16|u16|f32) "
    assert not re.search(scalar, ptx), ptx[-3000:]
    # x's data pointer off by one element: x alone is read element by element.
    unaligned = torch.empty(4 * 6 * 24 + 1, dtype=dtype)[1:].view(4, 6, 24)
    ptx_x = k.compile(t, unaligned, t, 2.0, arch="sm_90").ptx
    assert re.search(scalar, ptx_x) and 0 < vector_loads(ptx_x) < vector_loads(ptx)
    # Debug mode compiles the check of the promise (last stride 1, offset a multiple of V).
    ptx = cj.jit(ALIGNED_RUNS, debug=True).compile(t, t, t, 2.0, arch="sm_90").ptx
    strings = [bytes(int(b) for b in body.split(",")).decode()
               for body in re.findall(r"\.b8 \$str[^=]*= \{([\d, ]+)\}", ptx)]
    for what in ("load_aligned_run", "store_aligned_run"):
        assert any(f"cj::Array::{what}: the last stride is not 1" in x for x in strings), strings


def test_grid_stride_detection():
    assert cj.jit(AXPY)._core.grid_strides
    assert not cj.jit(README)._core.grid_strides
    # Reading gridDim is not enough: the kernel may still give each thread one task.
    k = cj.jit("__global__ void k(float* o) { if (blockIdx.x == gridDim.x - 1) o[threadIdx.x] = 1.0f; }")
    assert not k._core.grid_strides


# -- on the GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int32], ids=str)
@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 20], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset"])
def test_elementwise_matches_torch(device, dtype, n, offset):
    k = cj.jit(AXPY)
    x = random_values([n + offset], dtype, device)[offset:]
    y = random_values([n + offset], dtype, device)[offset:]
    out = torch.empty(n + offset, dtype=dtype, device=device)[offset:]
    want = (2.0 * x.float() + y.float()).to(dtype)
    poison_(out, want)
    k.forall(n)(out, x, y, 2.0)
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_elementwise_2d_layouts(device, layout):
    k = cj.jit(ROWSUM_2D)
    base = random_values([64, 96], torch.float32, device)
    x = {"contiguous": base[:, :48], "transposed": base.t()[:48, :64].t(), "sliced": base[::2, ::2]}[layout]
    y = random_values(list(x.shape), torch.float32, device)
    out = torch.empty_like(y)
    poison_(out)
    k[4, 64](out, x, y)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def run_layouts(shape, dtype, device):
    """(name, x) pairs of one shape: contiguous, transposed (last stride not 1), sliced, a last
    dimension expanded from one element (stride 0), offset by one element (unaligned runs)."""
    b, m, n = shape
    yield "contiguous", random_values(shape, dtype, device)
    yield "transposed", random_values([b, n, m], dtype, device).transpose(1, 2)
    yield "sliced", random_values([b, m, 2 * n], dtype, device)[:, :, ::2]
    yield "expanded", random_values([b, m, 1], dtype, device).expand(shape)
    yield "offset", random_values([b * m * n + 1], dtype, device)[1:].view(shape)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset"])
def test_aligned_runs_match_torch(device, dtype, offset):
    """Arrays whose runs are whole and at multiples of 8 (last size 64, a view of rows 72
    apart, a transposed contiguous array), with the data pointer 16-byte aligned or not."""
    k = cj.jit(ALIGNED_RUNS)
    shape = (3, 5, 64)
    x = random_values([3 * 5 * 72 + offset], dtype, device)[offset:].view(3, 5, 72)[..., :64]
    y = random_values([5, 3, 64], dtype, device).transpose(0, 1)
    out = torch.empty(shape, dtype=dtype, device=device)
    want = (2.0 * x.float() + y.float()).to(dtype)
    poison_(out, want)
    k.forall(run_tasks(shape))(out, x, y, 2.0)
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 64), (3, 5, 13), (1, 1, 3), (4, 33, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_for_each_run_matches_torch_in_every_layout(device, dtype, shape):
    k = cj.jit(RUNS)
    y = random_values(shape, dtype, device)
    for name, x in run_layouts(shape, dtype, device):
        for out in (torch.empty(shape, dtype=dtype, device=device),
                    torch.empty(shape[::-1], dtype=dtype, device=device).permute(2, 1, 0)):
            want = (2.0 * x.float() + y.float()).to(dtype)
            poison_(out, want)
            k.forall(run_tasks(shape))(out, x, y, 2.0)
            torch.testing.assert_close(out, want, rtol=0, atol=0, msg=lambda m: f"{name}: {m}")
            poison_(out, want)
            k[3, 32](out, x, y, 2.0)  # any grid covers the runs
            torch.testing.assert_close(out, want, rtol=0, atol=0, msg=lambda m: f"{name}, small grid: {m}")


FOR_EACH = r"""
__global__ void scale(cj::Array<float, 1> out, cj::Array<const float, 1> x, float a) {
  cj::for_each(out.size(0), [&](long long i) { out[i] = a * x[i]; });
}
"""


def test_task_loop_kinds():
    assert cj.jit(AXPY)._core.grid_strides and cj.jit(FOR_EACH)._core.grid_strides


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("size", ["1", "1000", "2^22+3", "past_l2"])
def test_forall_gives_elementwise_whole_vectors_per_thread(device, dtype, size):
    # One step of the vector loop (four 16-byte vectors) per thread while the three arrays fit
    # in L2, one vector per thread once they do not.
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    moved = 3 * torch.empty(0, dtype=dtype).element_size()
    n = {"1": 1, "1000": 1000, "2^22+3": (1 << 22) + 3, "past_l2": l2 // moved + 17}[size]
    lanes = 16 // torch.empty(0, dtype=dtype).element_size()
    per_thread = lanes if n * moved > l2 else 4 * lanes
    if size == "past_l2":
        assert per_thread == lanes
    k = cj.jit(AXPY)
    args = forall_axpy(k, n, dtype, device)
    grid, block, virtual_blocks, *_ = k._core.forall_shape(args, n)
    assert grid == -(-n // (per_thread * block)) and virtual_blocks == 0, (grid, block, per_thread)
    assert ("forall", n, None, 0) in k._launch.launchers


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["unaligned", "strided"])
def test_forall_gives_elementwise_without_vectors_one_element_per_thread(device, case):
    k = cj.jit(AXPY)
    n = 100_000
    base = random_values([2 * n + 1], torch.float32, device)
    x = base[1:n + 1] if case == "unaligned" else base[: 2 * n : 2]
    y = random_values([n], torch.float32, device)
    out = torch.empty(n, device=device)
    poison_(out)
    k.forall(n)(out, x, y, 2.0)
    torch.testing.assert_close(out, 2.0 * x + y)
    grid, block, virtual_blocks, *_ = k._core.forall_shape((out, x, y, 2.0), n)
    assert grid == -(-n // block) and virtual_blocks == 0


@pytest.mark.gpu
@pytest.mark.parametrize("source", [README, FOR_EACH], ids=["one_per_thread", "for_each"])
def test_forall_covers_one_element_per_thread_kernels(device, source):
    k = cj.jit(source)
    n = (1 << 22) + 3
    x = random_values([n], torch.float32, device)
    out = torch.empty_like(x)
    poison_(out)
    args = (out, x, x, 1.0) if source is README else (out, x, 2.0)
    k.forall(n)(*args)
    torch.testing.assert_close(out, 2 * x)
    grid, block, virtual_blocks, *_ = k._core.forall_shape(args, n)
    # The README kernel runs on forall's virtual grid (test_virtual_grid.py), four float32
    # virtual blocks per physical block; a for_each kernel loops over the grid itself.
    assert virtual_blocks == (4 if source is README else 0)
    assert grid == -(-n // (block * max(1, virtual_blocks))) and 32 <= block <= 1024


@pytest.mark.gpu
def test_forall_takes_keywords_and_streams(device):
    k = cj.jit(README)
    n = 5000
    x = random_values([n], torch.float32, device)
    out = torch.empty_like(x)
    poison_(out)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    k.forall(n, stream=s)(out, x, y=x, a=1.5)
    s.synchronize()
    torch.testing.assert_close(out, 2.5 * x)


@pytest.mark.gpu
def test_forall_never_warns_about_small_work(device, monkeypatch):
    monkeypatch.setenv("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "1")
    k = cj.jit(README)
    x = random_values([100], torch.float32, device)
    out = torch.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k.forall(100)(out, x, x, 1.0)
    with pytest.warns(cj.LowOccupancyWarning):
        k[1, 128](out, x, x, 1.0)


@pytest.mark.gpu
def test_vector_load_store(device):
    k = cj.jit(VEC)
    x = random_values([1024], torch.float32, device)
    out = torch.empty_like(x)
    poison_(out)
    k[1, 256](out, x, 3.0)
    torch.testing.assert_close(out, 3.0 * x)


@pytest.mark.gpu
def test_debug_mode_checks_vector_accesses(device):
    k = cj.jit(r"""
__global__ void k(cj::Array<float, 1> out, cj::Array<const float, 1> x) {
  out.store<4>(2, x.load<4>(0));
}""", debug=True)
    x = random_values([8], torch.float32, device)
    with pytest.raises(cj.KernelAssertionError, match="index 2"):
        k[1, 1](torch.empty_like(x), x)
