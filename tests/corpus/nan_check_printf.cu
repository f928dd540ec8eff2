// cj-corpus: name=check_finite args=f32[1024],i32[1],i32
// Debug helper that reports the first non-finite values with printf.
#include <cstdio>
#include <cmath>

__global__ void check_finite(const float* values, int* found, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = values[i];
  if (!std::isfinite(v)) {
    if (atomicAdd(found, 1) < 8)
      printf("non-finite value %f at index %d (block %d, thread %d)%s\n", v, i, blockIdx.x, threadIdx.x,
             std::isnan(v) ? " [nan]" : "");
  }
}
