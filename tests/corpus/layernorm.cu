// cj-corpus: name=layer_norm_forward args=f32[4096],f32[64],f32[64],f32[64],f32[4096],i32,i32,f32
// LayerNorm forward: Welford mean/variance per row, rsqrtf for the inverse standard deviation.
#include <cmath>
#include <cstdint>

struct WelfordData {
  float mean;
  float m2;
  float count;
};

__device__ inline WelfordData welford_combine(WelfordData a, WelfordData b) {
  float count = a.count + b.count;
  if (count == 0.f) return {0.f, 0.f, 0.f};
  float delta = b.mean - a.mean;
  float nb_over_n = b.count / count;
  return {a.mean + delta * nb_over_n, a.m2 + b.m2 + delta * delta * a.count * nb_over_n, count};
}

__global__ void layer_norm_forward(const float* __restrict__ X, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ mean_out,
                                   float* __restrict__ Y, int M, int N, float eps) {
  const int64_t row = blockIdx.x;
  if (row >= M) return;
  const float* x = X + row * N;
  WelfordData w{0.f, 0.f, 0.f};
  for (int j = threadIdx.x; j < N; j += blockDim.x) w = welford_combine(w, {x[j], 0.f, 1.f});
  for (int offset = 16; offset > 0; offset >>= 1) {
    WelfordData other{__shfl_down_sync(0xffffffffu, w.mean, offset),
                      __shfl_down_sync(0xffffffffu, w.m2, offset),
                      __shfl_down_sync(0xffffffffu, w.count, offset)};
    w = welford_combine(w, other);
  }
  const float mean = __shfl_sync(0xffffffffu, w.mean, 0);
  const float var = __shfl_sync(0xffffffffu, w.m2, 0) / N;
  const float rstd = rsqrtf(fmaxf(var, 0.f) + eps);
  if (threadIdx.x == 0) mean_out[row] = mean;
  for (int j = threadIdx.x; j < N; j += blockDim.x)
    Y[row * N + j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
}
