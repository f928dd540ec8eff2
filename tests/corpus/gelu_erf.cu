// cj-corpus: name=gelu_erf_kernel args=f64[1024],f64[1024],i64
// Exact GELU through erf, templated on the element type (here instantiated for double).
#include <cmath>

template <typename scalar_t>
__global__ void gelu_erf_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x, int64_t numel) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = idx; i < numel; i += stride) {
    const scalar_t v = x[i];
    out[i] = v * scalar_t(0.5) * (scalar_t(1) + std::erf(v * scalar_t(M_SQRT1_2)));
  }
}
