// cj-corpus: name=warp_row_max args=f32[4096],f32[128],i32
// Row maxima with cub::WarpReduce, one warp per 32-element row, starting from -INFINITY.
#include <cub/warp/warp_reduce.cuh>
#include <cfloat>
#include <cmath>

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void warp_row_max(const float* in, float* out, int rows) {
  using WarpReduce = cub::WarpReduce<float>;
  __shared__ typename WarpReduce::TempStorage temp_storage[4];
  const int warp_id = threadIdx.x / 32;
  const int row = blockIdx.x * 4 + warp_id;
  float v = row < rows ? in[row * 32 + threadIdx.x % 32] : -INFINITY;
  float row_max = WarpReduce(temp_storage[warp_id]).Reduce(v, MaxOp());
  if (threadIdx.x % 32 == 0 && row < rows) out[row] = fmaxf(row_max, -FLT_MAX);
}
