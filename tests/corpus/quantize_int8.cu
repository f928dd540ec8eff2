// cj-corpus: name=quantize_per_tensor_int8 args=f32[1024],u8[1024],f32,i32,i32
// Per-tensor affine quantization to int8 with saturation at INT8_MIN/INT8_MAX.
#include <cstdint>
#include <algorithm>
#include <cmath>

__global__ void quantize_per_tensor_int8(const float* __restrict__ input, uint8_t* __restrict__ output, float scale,
                                         int zero_point, int numel) {
  const float inv_scale = 1.0f / scale;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += gridDim.x * blockDim.x) {
    long q = std::lrint(input[i] * inv_scale) + zero_point;
    q = std::clamp<long>(q, INT8_MIN, INT8_MAX);
    output[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}
