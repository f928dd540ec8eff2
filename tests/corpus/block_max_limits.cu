// cj-corpus: name=block_reduce_max args=f32[4096],f32[16],i32
// Per-block maximum seeded with std::numeric_limits<float>::lowest().
#include <limits>
#include <algorithm>

template <typename T, int BLOCK>
__device__ T block_max(T val) {
  __shared__ T shared[BLOCK / 32];
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) val = std::max(val, __shfl_down_sync(0xffffffff, val, offset));
  if (lane == 0) shared[wid] = val;
  __syncthreads();
  val = (threadIdx.x < BLOCK / 32) ? shared[lane] : std::numeric_limits<T>::lowest();
  if (wid == 0)
    for (int offset = 16; offset > 0; offset >>= 1) val = std::max(val, __shfl_down_sync(0xffffffff, val, offset));
  return val;
}

__global__ void block_reduce_max(const float* __restrict__ in, float* __restrict__ out, int n) {
  float thread_max = std::numeric_limits<float>::lowest();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    thread_max = std::max(thread_max, in[i]);
  thread_max = block_max<float, 256>(thread_max);
  if (threadIdx.x == 0) out[blockIdx.x] = thread_max;
}
