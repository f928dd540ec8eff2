// cj-corpus: name=block_sum_squares args=f32[4096],f32[16],i32 tmpl=256
// Sum of squares per block with cub::BlockReduce, then the norm with std::sqrt.
#include <cub/block/block_reduce.cuh>
#include <cmath>

template <int BLOCK_THREADS>
__global__ void __launch_bounds__(BLOCK_THREADS) block_sum_squares(const float* in, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, BLOCK_THREADS>;
  __shared__ typename BlockReduce::TempStorage temp_storage;
  float thread_sum = 0.0f;
  for (int i = blockIdx.x * BLOCK_THREADS + threadIdx.x; i < n; i += gridDim.x * BLOCK_THREADS) {
    thread_sum += in[i] * in[i];
  }
  float block_sum = BlockReduce(temp_storage).Sum(thread_sum);
  if (threadIdx.x == 0) out[blockIdx.x] = std::sqrt(block_sum);
}
