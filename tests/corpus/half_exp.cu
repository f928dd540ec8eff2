// cj-corpus: name=half_sigmoid args=f16[1024],f16[1024],i32
// fp16 sigmoid computed in float, with std::exp from <cmath> next to <cuda_fp16.h>.
#include <cuda_fp16.h>
#include <cmath>

__global__ void half_sigmoid(__half* out, const __half* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = __half2float(in[i]);
    float y = x >= 0.f ? 1.f / (1.f + std::exp(-x)) : std::exp(x) / (1.f + std::exp(x));
    out[i] = __float2half_rn(y);
    if (__hisnan(in[i])) out[i] = in[i];
  }
}
