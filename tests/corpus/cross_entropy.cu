// cj-corpus: name=cross_entropy_fwd args=f32[4096],i64[64],f32[64],i32,i32,i64
// Cross-entropy loss from logits: numerically stable log-sum-exp per row, ignore_index support.
#include <cmath>
#include <cfloat>
#include <cstddef>

__global__ void cross_entropy_fwd(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                  float* __restrict__ losses, int n_rows, int n_classes, int64_t ignore_index) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const int64_t target = targets[row];
  if (target == ignore_index) {
    losses[row] = 0.0f;
    return;
  }
  const float* x = logits + static_cast<size_t>(row) * n_classes;
  float m = -FLT_MAX;
  for (int c = 0; c < n_classes; ++c) m = fmaxf(m, x[c]);
  float sum = 0.0f;
  for (int c = 0; c < n_classes; ++c) sum += expf(x[c] - m);
  float lse = logf(sum) + m;
  losses[row] = std::isfinite(lse) ? lse - x[target] : INFINITY;
}
