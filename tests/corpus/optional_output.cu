// cj-corpus: name=rms_norm_stats args=f32[4096],f32[4096],f32[64],f32[64],i32,i32,f32
// RMSNorm whose saved-statistics output is optional: inference passes NULL for rstd_out and the
// kernel skips the store (`if (rstd_out)`), as fused-norm kernels in training libraries do.
#include <cmath>

__global__ void rms_norm_stats(float* __restrict__ out, const float* __restrict__ in,
                               const float* __restrict__ weight, float* __restrict__ rstd_out,
                               int rows, int cols, float eps) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* x = in + static_cast<long long>(row) * cols;
  float sum_sq = 0.f;
  for (int c = 0; c < cols; ++c) sum_sq += x[c] * x[c];
  const float rstd = rsqrtf(sum_sq / cols + eps);
  if (rstd_out != nullptr) rstd_out[row] = rstd;
  for (int c = 0; c < cols; ++c) out[static_cast<long long>(row) * cols + c] = x[c] * rstd * weight[c];
}
