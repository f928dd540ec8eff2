"""Whole CUDA files and nvcc's device-pass environment on the GPU: a .cu file with host code
launched against torch, kernels of an included header, struct parameters by value, other
libraries' complex types, cuRAND states in tensors, device-side launches, and integer parameters
taking Python and numpy ints of any width that fits. Random inputs, outputs poisoned first."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

import torch_cudajit as cj

from _support import COMPLEX_SOURCE, CURAND_SOURCE, needs_cudadevrt, needs_curand

pytestmark = pytest.mark.gpu

FILE = r"""#include <stdio.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "helper_missing.h"
#include "lib.cuh"

const float kBias = 0.25f;
cublasHandle_t handle;

template <typename T>
__global__ void axpb(T* out, const T* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = T(a * float(x[i]) + kBias + offset());
}

void reference(float* out, const float* x, float a, int n) {
  for (int i = 0; i < n; ++i) out[i] = a * x[i] + kBias + 1.0f;
}

int main() {
  float* d = nullptr;
  cudaMalloc(&d, 16);
  axpb<<<1, 1>>>(d, d, 1.0f, 1);
  cublasCreate(&handle);
  printf("ok\n");
}
"""

LIB = r"""#pragma once
__device__ inline float offset() { return 1.0f; }
__global__ void square(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * x[i];
}
void host_helper() {}
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_whole_file_kernel_matches_torch(tmp_path, dtype):
    (tmp_path / "lib.cuh").write_text(LIB)
    path = tmp_path / "file.cu"
    path.write_text(FILE)
    m = cj.load(path)
    n = 1000
    x = torch.randn(n, device="cuda", dtype=dtype)
    out = torch.full_like(x, float("nan"))
    m["axpb"][(n + 127) // 128, 128](out, x, 1.5, n)
    want = (1.5 * x.float() + 0.25 + 1.0).to(dtype)
    torch.testing.assert_close(out, want)
    y = torch.randn(n, device="cuda")
    y2 = y.clone()
    m["square"][(n + 127) // 128, 128](y2, n)
    torch.testing.assert_close(y2, y * y)


STRUCTS = r"""
struct Affine { float scale; int shift; double extra; float2 pair; unsigned char flags[2]; };
__global__ void affine(Affine p, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = p.scale * x[i] + p.shift + float(p.extra) + p.pair.x * p.pair.y + p.flags[1];
}
template <typename T> struct interval_gpu { T lo, hi; };
template <typename T>
__global__ void clamp(interval_gpu<T> iv, T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] < iv.lo ? iv.lo : (x[i] > iv.hi ? iv.hi : x[i]);
}
"""


@dataclasses.dataclass
class Affine:
    scale: float
    shift: int
    extra: float
    pair: tuple
    flags: list


@pytest.mark.parametrize("form", ["tuple", "dict", "object"])
def test_struct_by_value(form):
    m = cj.jit(STRUCTS)
    n = 513
    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    values = (1.5, -3, 0.125, (2.0, 0.5), [7, 9])
    arg = {"tuple": values,
           "dict": dict(zip(("scale", "shift", "extra", "pair", "flags"), values)),
           "object": Affine(*values)}[form]
    m["affine"][(n + 127) // 128, 128](arg, x, out, n)
    torch.testing.assert_close(out, 1.5 * x - 3 + 0.125 + 1.0 + 9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_struct_template_deduced_from_the_tensor(dtype):
    m = cj.jit(STRUCTS)
    x = torch.randn(1000, device="cuda", dtype=dtype)
    y = x.clone()
    m["clamp"][8, 128]((-0.5, 0.75), y, x.numel())
    torch.testing.assert_close(y, x.clamp(-0.5, 0.75))


COMPLEX = COMPLEX_SOURCE


def test_other_libraries_complex_types():
    m = cj.jit(COMPLEX)
    n = 300
    y = torch.randn(n, device="cuda", dtype=torch.complex128)
    x = torch.full_like(y, complex("nan+nanj"))
    m["t"][3, 128](x, y, 1.5 - 0.5j, n)
    torch.testing.assert_close(x, y * (1.5 - 0.5j))
    z = torch.randn(n, device="cuda", dtype=torch.complex64)
    z0 = z.clone()
    m["s"][3, 128](z, 2 + 1j, n)
    torch.testing.assert_close(z, z0 * (2 + 1j))


CURAND = CURAND_SOURCE


@needs_curand
@pytest.mark.parametrize("state,size", [("curandStateXORWOW_t", 48), ("curandStatePhilox4_32_10_t", 64)])
def test_curand_states_in_a_byte_tensor(state, size):
    n = 4096
    init = cj.jit(CURAND, "init", template_args={"State": state})
    draw = cj.jit(CURAND, "draw", template_args={"State": state})
    states = torch.empty(n * size, dtype=torch.uint8, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    init[n // 256, 256](states, 1234, n)
    draw[n // 256, 256](states, out, n)
    assert bool(((out > 0) & (out <= 1)).all())
    assert abs(out.mean().item() - 0.5) < 0.05
    out2 = torch.full_like(out, float("nan"))
    init[n // 256, 256](states, 1234, n)
    draw[n // 256, 256](states, out2, n)
    torch.testing.assert_close(out, out2)  # the same seed, the same numbers


@needs_cudadevrt
def test_device_side_launch_and_device_runtime():
    parent = cj.jit(r"""
__global__ void child(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2 * x[i];
}
__global__ void parent(float* x, int n) { if (threadIdx.x == 0) child<<<(n + 127) / 128, 128>>>(x, n); }
""", "parent")
    x = torch.randn(1000, device="cuda")
    y = x.clone()
    parent[1, 32](y, x.numel())
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2 * x)


@pytest.mark.parametrize("value", [7, np.int64(7), np.int32(7), 2**31 - 1, -2**31])
def test_int_parameters_take_ints_of_any_width_that_fits(value):
    k = cj.jit("__global__ void put(long long* out, int v) { out[0] = v; }")
    out = torch.full((1,), -1, dtype=torch.int64, device="cuda")
    k[1, 1](out, value)
    assert out.item() == int(value)
    with pytest.raises((ValueError, OverflowError), match="int"):
        k[1, 1](out, 2**31)


def test_cupy_thrust_complex_header():
    """CuPy's own thrust::complex (cupy/complex.cuh, as CuPy's RawKernel tests include it)."""
    cupy = pytest.importorskip("cupy")
    include = os.path.join(os.path.dirname(cupy.__file__), "_core", "include")
    if not os.path.exists(os.path.join(include, "cupy", "complex.cuh")):
        pytest.skip("this CuPy ships no cupy/complex.cuh")
    k = cj.jit(r"""#include <cupy/complex.cuh>
__global__ void mul(thrust::complex<double>* x, const thrust::complex<double>* y,
                    thrust::complex<double> a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = y[i] * a;
}""", include_dirs=[include])
    y = torch.randn(200, device="cuda", dtype=torch.complex128)
    x = torch.full_like(y, complex("nan+nanj"))
    k[2, 128](x, y, 0.5 + 2j, np.int64(200))
    torch.testing.assert_close(x, y * (0.5 + 2j))
