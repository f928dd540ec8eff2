// cj-corpus: name=float_to_ordered_uint args=f32[1024],i32[1024],i32
// Maps floats to order-preserving unsigned keys (radix-sort style), type-punning with memcpy.
#include <cstring>
#include <cstdint>

__device__ __forceinline__ uint32_t float_flip(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint32_t mask = -int32_t(bits >> 31) | 0x80000000u;
  return bits ^ mask;
}

__global__ void float_to_ordered_uint(const float* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    uint32_t key = float_flip(in[i]);
    int as_int;
    memcpy(&as_int, &key, sizeof(as_int));
    out[i] = as_int;
    if (i == 0) std::memset(&key, 0, sizeof(key));
  }
}
