// cj-corpus: name=axpby_vec4 args=f32[1024],f32[1024],f32[1024],f32,f32,i32
// Vectorized axpby that stages four elements at a time in a std::array.
#include <array>
#include <cstddef>

constexpr std::size_t kVec = 4;

__device__ __forceinline__ std::array<float, kVec> load4(const float* p) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  return {v.x, v.y, v.z, v.w};
}

__global__ void axpby_vec4(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ y,
                           float a, float b, int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * static_cast<int>(kVec);
  if (base + static_cast<int>(kVec) <= n) {
    std::array<float, kVec> xs = load4(x + base);
    std::array<float, kVec> ys = load4(y + base);
    std::array<float, kVec> r{};
#pragma unroll
    for (std::size_t k = 0; k < r.size(); ++k) r[k] = a * xs[k] + b * ys[k];
    *reinterpret_cast<float4*>(out + base) = make_float4(std::get<0>(r), std::get<1>(r), r[2], r.back());
  } else {
    for (int i = base; i < n; ++i) out[i] = a * x[i] + b * y[i];
  }
}
