// cj-corpus: name=rms_norm_kernel args=f16[4096],f16[4096],f16[64],f32,i32
// RMSNorm over fp16 activations with fp32 accumulation (LLaMA-style).
#include <cuda_fp16.h>
#include <cmath>

template <int kWarpSize = 32>
__device__ __forceinline__ float warpReduceSum(float val) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask >>= 1) val += __shfl_xor_sync(0xffffffff, val, mask, kWarpSize);
  return val;
}

__global__ void rms_norm_kernel(__half* __restrict__ out, const __half* __restrict__ input,
                                const __half* __restrict__ weight, const float epsilon, const int hidden_size) {
  __shared__ float s_variance;
  __shared__ float warp_sums[32];
  float variance = 0.0f;
  const __half* row = input + blockIdx.x * hidden_size;

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = __half2float(row[idx]);
    variance += x * x;
  }
  variance = warpReduceSum(variance);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = variance;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < (blockDim.x + 31) / 32 ? warp_sums[threadIdx.x] : 0.f;
    v = warpReduceSum(v);
    if (threadIdx.x == 0) s_variance = 1.0f / std::sqrt(v / hidden_size + epsilon);
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    float x = __half2float(row[idx]);
    out[blockIdx.x * hidden_size + idx] = __float2half(x * s_variance) * weight[idx];
  }
}
