// cj-corpus: name=histogram_u8 args=u8[4096],i32[256],i32
// 256-bin histogram of bytes with a privatized shared-memory histogram.
#include <climits>
#include <cstdint>

__global__ void histogram_u8(const uint8_t* __restrict__ data, int* __restrict__ hist, int n) {
  __shared__ unsigned int local[UCHAR_MAX + 1];
  for (int b = threadIdx.x; b <= UCHAR_MAX; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  static_assert(CHAR_BIT == 8, "byte histogram");
  for (int b = threadIdx.x; b <= UCHAR_MAX; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], static_cast<int>(local[b]));
}
