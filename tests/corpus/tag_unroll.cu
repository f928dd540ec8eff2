// cj-corpus: name=axpy_unrolled args=f32[1000],f32[1000],f32,i32,i32
// A compile-time unroll factor passed as a tag argument (cuda::std::integral_constant), the way
// CCCL- and CUTLASS-style code passes constants through function parameters: the Python int
// picks the instance, as a template argument would.
#include <cuda/std/type_traits>

template <int Unroll>
__global__ void axpy_unrolled(float* out, const float* x, float a, int n,
                              cuda::std::integral_constant<int, Unroll>) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * Unroll;
#pragma unroll
  for (int k = 0; k < Unroll; ++k)
    if (base + k < n) out[base + k] = a * x[base + k];
}
