// cj-corpus: name=minmax_per_block args=f32[4096],f32[16],f32[16],i32
// Per-block min and max carried together as a std::tuple through a shuffle reduction.
#include <tuple>
#include <utility>
#include <limits>
#include <algorithm>

__device__ std::tuple<float, float> combine(const std::tuple<float, float>& a, const std::tuple<float, float>& b) {
  return std::make_tuple(std::min(std::get<0>(a), std::get<0>(b)), std::max(std::get<1>(a), std::get<1>(b)));
}

__global__ void minmax_per_block(const float* in, float* mins, float* maxs, int n) {
  auto acc = std::make_tuple(std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest());
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc = combine(acc, std::make_tuple(in[i], in[i]));
  for (int offset = 16; offset > 0; offset >>= 1) {
    float lo, hi;
    std::tie(lo, hi) = acc;
    acc = combine(acc, {__shfl_down_sync(0xffffffff, lo, offset), __shfl_down_sync(0xffffffff, hi, offset)});
  }
  if (threadIdx.x == 0) {
    auto [lo, hi] = acc;
    mins[blockIdx.x] = lo;
    maxs[blockIdx.x] = hi;
  }
  std::pair<int, int> range = std::make_pair(0, n);
  (void)range;
}
