// cj-corpus: name=adam_update args=f32[1024],f32[1024],f32[1024],f32[1024],f32,f32,f32,f32,f32,i32,i32
// Fused Adam(W) step with bias correction through std::pow on the step count.
#include <cmath>

__global__ void adam_update(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ exp_avg,
                            float* __restrict__ exp_avg_sq, float lr, float beta1, float beta2, float eps,
                            float weight_decay, int step, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float bias_correction1 = 1.0f - std::pow(beta1, step);
  const float bias_correction2 = 1.0f - std::pow(beta2, step);
  float g = grad[i];
  float p = param[i];
  p *= 1.0f - lr * weight_decay;
  float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
  float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  const float denom = std::sqrt(v) / std::sqrt(bias_correction2) + eps;
  param[i] = p - (lr / bias_correction1) * m / denom;
}
