// cj-corpus: name=argmax_rows args=f32[4096],i64[64],i32,i32
// Row argmax; ties go to the smallest index, NaN compares as the largest value.
#include <climits>
#include <limits>
#include <cmath>

__device__ __forceinline__ bool greater_or_nan(float a, int ia, float b, int ib) {
  if (std::isnan(a)) return !std::isnan(b) || ia < ib;
  if (std::isnan(b)) return false;
  return a > b || (a == b && ia < ib);
}

__global__ void argmax_rows(const float* __restrict__ x, int64_t* __restrict__ indices, int rows, int cols) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float best = -std::numeric_limits<float>::infinity();
  int best_idx = INT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = x[(size_t)row * cols + c];
    if (greater_or_nan(v, c, best, best_idx)) { best = v; best_idx = c; }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    float ov = __shfl_down_sync(0xffffffff, best, offset);
    int oi = __shfl_down_sync(0xffffffff, best_idx, offset);
    if (greater_or_nan(ov, oi, best, best_idx)) { best = ov; best_idx = oi; }
  }
  if (threadIdx.x == 0) indices[row] = best_idx == INT_MAX ? -1 : best_idx;
}
