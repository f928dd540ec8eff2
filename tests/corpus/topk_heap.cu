// cj-corpus: name=topk_per_thread args=f32[4096],f32[512],i32
// Per-thread top-8 over a strided slice kept in a min-heap (std::push_heap/std::pop_heap).
#include <algorithm>
#include <functional>
#include <limits>

constexpr int K = 8;

__global__ void topk_per_thread(const float* in, float* out, int n) {
  float heap[K];
  std::fill(heap, heap + K, -std::numeric_limits<float>::infinity());
  std::make_heap(heap, heap + K, std::greater<float>());
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int nthreads = gridDim.x * blockDim.x;
  for (int i = tid; i < n; i += nthreads) {
    if (in[i] > heap[0]) {
      std::pop_heap(heap, heap + K, std::greater<float>());
      heap[K - 1] = in[i];
      std::push_heap(heap, heap + K, std::greater<float>());
    }
  }
  std::sort_heap(heap, heap + K, std::greater<float>());
  std::copy(heap, heap + K, out + tid * K);
}
