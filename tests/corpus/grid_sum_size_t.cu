// cj-corpus: name=grid_stride_sum args=f32[1024],f32[1],i64
// Grid-stride sum with std::size_t indices and a warp-level pre-reduction before the atomic.
#include <cstddef>

__global__ void grid_stride_sum(const float* data, float* result, std::size_t n) {
  float acc = 0.0f;
  const std::ptrdiff_t lane = static_cast<std::ptrdiff_t>(threadIdx.x & (warpSize - 1));
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x) {
    acc += data[i];
  }
  for (int offset = warpSize / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffff, acc, offset);
  if (lane == 0) atomicAdd(result, acc);
}
