// cj-corpus: name=softmax_warp_kernel args=f32[4096],f32[4096],i32,i32
// Row-wise softmax, one warp per row (the layout of many attention and classifier heads).
#include <cmath>

#define WARP_SIZE 32

__device__ __forceinline__ float warp_reduce_max(float val) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
    val = fmaxf(val, __shfl_xor_sync(0xffffffff, val, offset));
  return val;
}

__device__ __forceinline__ float warp_reduce_sum(float val) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
    val += __shfl_xor_sync(0xffffffff, val, offset);
  return val;
}

__global__ void softmax_warp_kernel(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
  const int warps_per_block = blockDim.x / WARP_SIZE;
  const int row = blockIdx.x * warps_per_block + threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;
  if (row >= rows) return;

  const float* x = in + (size_t)row * cols;
  float* y = out + (size_t)row * cols;

  float row_max = -INFINITY;
  for (int c = lane; c < cols; c += WARP_SIZE) row_max = fmaxf(row_max, x[c]);
  row_max = warp_reduce_max(row_max);

  float sum = 0.f;
  for (int c = lane; c < cols; c += WARP_SIZE) sum += expf(x[c] - row_max);
  sum = warp_reduce_sum(sum);

  const float inv = 1.f / sum;
  for (int c = lane; c < cols; c += WARP_SIZE) y[c] = expf(x[c] - row_max) * inv;
}
