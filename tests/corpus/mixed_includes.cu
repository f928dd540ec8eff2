// cj-corpus: name=clip_grad_norm_scale args=f32[1024],f32[1],f32,i32
// Gradient clipping by global norm, including <cmath>, <algorithm> and <cstdio> together.
#include <cmath>
#include <algorithm>
#include <cstdio>

__global__ void clip_grad_norm_scale(float* grads, const float* total_norm_sq, float max_norm, int n) {
  const float total_norm = std::sqrt(*total_norm_sq);
  const float clip_coef = max_norm / (total_norm + 1e-6f);
  const float scale = std::min(clip_coef, 1.0f);
  if (blockIdx.x == 0 && threadIdx.x == 0 && clip_coef < 1.0f)
    printf("clipping gradients: norm %.4f > %.4f\n", total_norm, max_norm);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float g = grads[i] * scale;
    grads[i] = std::max(std::min(g, 1e4f), -1e4f);
    if (std::isinf(g)) grads[i] = std::copysign(1e4f, g);
  }
}
