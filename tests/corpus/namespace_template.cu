// cj-corpus: name=scaled_residual_add args=f32[1024],f32[1024],f32[1024],f32,i32
// Kernels kept in a project namespace with their helpers in a nested detail namespace, the way
// PyTorch extensions and FasterTransformer-style libraries lay out their .cu files.
#include <cuda_fp16.h>

namespace ops {
namespace detail {

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

}  // namespace detail

// out = x + alpha * residual, accumulated in float
template <typename T>
__global__ void scaled_residual_add(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ residual,
                                    float alpha, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = static_cast<T>(detail::to_float(x[i]) + alpha * detail::to_float(residual[i]));
}

}  // namespace ops
