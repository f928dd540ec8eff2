"""Reliability on the GPU: property-based fuzzing (hypothesis) of dtypes, ranks, shapes and views
against torch, garbage raw stream handles, and memory of many debug-mode kernels. The CPU-side
regressions are in test_reliability.py."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_cudajit as cj
from _support import poison_, random_values

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# out = x * 2 + y through cj::Array indexing, one kernel per rank: the layout flags (contiguous
# or strided) of all three parameters come from the arguments.
_RANKS = r"""
template <typename T>
__device__ T f(T x, T y) { return x + x + y; }
__device__ bool f(bool x, bool y) { return x != y; }

template <typename T>
__global__ void op1(cj::Array<T, 1> o, cj::Array<const T, 1> x, cj::Array<const T, 1> y) {
  for (long long i = threadIdx.x; i < o.size(0); i += blockDim.x) o(i) = f(x(i), y(i));
}
template <typename T>
__global__ void op2(cj::Array<T, 2> o, cj::Array<const T, 2> x, cj::Array<const T, 2> y) {
  for (long long i = blockIdx.x; i < o.size(0); i += gridDim.x)
    for (long long j = threadIdx.x; j < o.size(1); j += blockDim.x) o(i, j) = f(x(i, j), y(i, j));
}
template <typename T>
__global__ void op3(cj::Array<T, 3> o, cj::Array<const T, 3> x, cj::Array<const T, 3> y) {
  for (long long i = blockIdx.x; i < o.size(0); i += gridDim.x)
    for (long long j = blockIdx.y; j < o.size(1); j += gridDim.y)
      for (long long k = threadIdx.x; k < o.size(2); k += blockDim.x) o(i, j, k) = f(x(i, j, k), y(i, j, k));
}
template <typename T>
__global__ void op4(cj::Array<T, 4> o, cj::Array<const T, 4> x, cj::Array<const T, 4> y) {
  for (long long i = blockIdx.x; i < o.size(0); i += gridDim.x)
    for (long long j = blockIdx.y; j < o.size(1); j += gridDim.y)
      for (long long k = blockIdx.z; k < o.size(2); k += gridDim.z)
        for (long long l = threadIdx.x; l < o.size(3); l += blockDim.x) o(i, j, k, l) = f(x(i, j, k, l), y(i, j, k, l));
}
"""

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
           torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]


@pytest.fixture(scope="module")
def ranks_module():
    return cj.jit(_RANKS)


def reference(x, y):
    if x.dtype == torch.bool:
        return x != y
    return x + x + y


@st.composite
def views(draw, rank):
    """A view of a fresh random tensor: permuted, sliced with steps and offsets, or expanded."""
    shape = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    kind = draw(st.sampled_from(["contiguous", "permuted", "stepped", "offset", "expanded"]))
    return shape, kind, draw(st.permutations(range(rank))), draw(st.integers(1, 3))


def make_view(shape, kind, perm, step, dtype, device):
    if kind == "permuted":
        base = random_values([shape[p] for p in perm], dtype, device)
        inverse = [perm.index(d) for d in range(len(shape))]
        return base.permute(*inverse)
    if kind == "stepped":
        base = random_values([s * step for s in shape], dtype, device)
        return base[tuple(slice(None, None, step) for _ in shape)]
    if kind == "offset":
        base = random_values([s + 1 for s in shape], dtype, device)
        return base[tuple(slice(1, None) for _ in shape)]
    if kind == "expanded":
        base = random_values([1] + list(shape[1:]), dtype, device)
        return base.expand(*shape)
    return random_values(shape, dtype, device)


@pytest.mark.gpu
@settings(max_examples=80, deadline=None, derandomize=True)
@given(data=st.data(), rank=st.integers(1, 4), dtype=st.sampled_from(_DTYPES))
def test_fuzz_views_against_torch(ranks_module, data, rank, dtype):
    device = torch.device("cuda", torch.cuda.current_device())
    x_spec = data.draw(views(rank), label="x")
    shape = x_spec[0]
    # y and out share x's shape, each with a layout of its own (out: never expanded).
    y_kind = data.draw(st.sampled_from(["contiguous", "permuted", "stepped", "offset", "expanded"]))
    o_kind = data.draw(st.sampled_from(["contiguous", "permuted", "stepped", "offset"]))
    perm = data.draw(st.permutations(range(rank)))
    x = make_view(*x_spec, dtype, device)
    y = make_view(shape, y_kind, perm, 2, dtype, device)
    out = make_view(shape, o_kind, perm, 2, dtype, device)
    expected = reference(x, y)
    poison_(out, expected)
    kernel = getattr(ranks_module, f"op{rank}")
    grid = tuple(min(s, 4) for s in shape[:-1][:3]) or 1
    kernel[grid, 32](out, x, y)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


_GARBAGE_STREAM = """
import torch, torch_cudajit as cj
k = cj.jit("__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }")
o = torch.zeros(32, device="cuda")
k[1, 32](o)
try:
    k[1, 32, HANDLE](o)
except ValueError as e:
    print("ValueError:", e)
torch.cuda.synchronize()
print("alive")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("handle", [0xDEADBEEF, 12345678, 0x7FFF00000000], ids=hex)
def test_garbage_stream_handle_is_a_value_error(handle):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _GARBAGE_STREAM.replace("HANDLE", str(handle))], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"the process died ({r.returncode}): {r.stderr[-2000:]}"
    assert f"stream handle {handle} (0x{handle:x}) is not a live CUDA stream of this process" in r.stdout
    assert r.stdout.rstrip().endswith("alive")


@pytest.mark.gpu
def test_live_raw_stream_handle_launches(device):
    k = cj.jit("__global__ void k(float* o, float v) { o[threadIdx.x] = v; }")
    s = torch.cuda.Stream()
    o = torch.zeros(32, device=device)
    k[1, 32, s.cuda_stream](o, 3.0)
    s.synchronize()
    assert torch.all(o == 3.0)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.gpu
def test_debug_kernels_do_not_leak(device):
    """Debug-mode kernels are large (-G code); dropping them gives the memory back, so RSS does
    not grow from one round of 100 kernel objects to the next (later rounds load the compiled
    code from the disk cache into new objects)."""
    src = "__global__ void k(float* o, int n) { int i = threadIdx.x; cj_assert(i < n, \"i\"); o[i] = %d; }"
    o = torch.zeros(32, device=device)

    def round_():
        kernels = [cj.jit(src % i, debug=True) for i in range(100)]
        for k in kernels:
            k[1, 32](o, 32)
        torch.cuda.synchronize()
        del kernels
        gc.collect()

    round_()  # compiles; warms allocator arenas and the driver's own caches
    round_()
    before = _rss_bytes()
    for _ in range(4):
        round_()
    growth = _rss_bytes() - before
    # A leak of the compiled code (tens of KiB per kernel) would show as well over 10 MiB here.
    assert growth < 10 * 2 ** 20, f"RSS grew by {growth / 2**20:.1f} MiB over 400 dropped debug kernels"
