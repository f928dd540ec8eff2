// cj-corpus: name=silu_and_mul_kernel args=bf16[512],bf16[1024],i32
// SwiGLU activation (silu(gate) * up) over bf16, as in LLM MLP blocks.
#include <cuda_bf16.h>
#include <cmath>

template <typename T>
__device__ __forceinline__ T silu(const T& x) {
  return (T)(((float)x) / (1.0f + expf((float)-x)));
}

__global__ void silu_and_mul_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ input, const int d) {
  const int64_t token_idx = blockIdx.x;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const float x = __bfloat162float(input[token_idx * 2 * d + idx]);
    const float y = __bfloat162float(input[token_idx * 2 * d + d + idx]);
    out[token_idx * d + idx] = __float2bfloat16(silu(x) * y + 0.f * std::fabs(x));
  }
}
