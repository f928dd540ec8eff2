// cj-corpus: name=bitonic_sort_block args=f32[1024],i32
// In-block bitonic sort of 1024 keys in shared memory, exchanging with std::swap.
#include <utility>

#define SORT_SIZE 1024

__global__ void bitonic_sort_block(float* keys, int n) {
  __shared__ float s[SORT_SIZE];
  float* block_keys = keys + blockIdx.x * SORT_SIZE;
  for (int i = threadIdx.x; i < SORT_SIZE; i += blockDim.x) s[i] = i < n ? block_keys[i] : 3.402823466e+38f;
  __syncthreads();
  for (unsigned size = 2; size <= SORT_SIZE; size <<= 1) {
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      for (unsigned i = threadIdx.x; i < SORT_SIZE; i += blockDim.x) {
        unsigned j = i ^ stride;
        if (j > i) {
          bool ascending = (i & size) == 0;
          if ((s[i] > s[j]) == ascending) std::swap(s[i], s[j]);
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < n && i < SORT_SIZE; i += blockDim.x) block_keys[i] = s[i];
}
