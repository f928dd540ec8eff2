// cj-corpus: name=leaky_relu_kernel args=f32[1024],f32[1024],f32,i32
// A live kernel next to two disabled ones, as projects keep an old version under `#if 0` and a
// fallback under `#ifndef FEATURE` (here FEATURE is defined above it, so the fallback is out).
#include <cmath>

#define CJ_CORPUS_HAS_FAST_LEAKY_RELU 1

#if 0
__global__ void leaky_relu_old(float* out, const float* in, float slope, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] > 0.f ? in[i] : slope * in[i];
}
#endif

#ifndef CJ_CORPUS_HAS_FAST_LEAKY_RELU
__global__ void leaky_relu_fallback(double* out, const double* in, double slope, long n) {
  this kernel does not even parse: it must never reach the compiler
}
#endif

__global__ void leaky_relu_kernel(float* __restrict__ out, const float* __restrict__ in, float slope, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = std::fmax(in[i], 0.f) + slope * std::fmin(in[i], 0.f);
}
