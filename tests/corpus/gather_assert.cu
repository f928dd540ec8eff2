// cj-corpus: name=embedding_gather args=f32[4096],f32[8192],i64[64],i32,i32,i32
// Embedding lookup that asserts its indices are in range, as PyTorch's index kernels do.
#include <cassert>
#include <cstdint>

__global__ void embedding_gather(float* __restrict__ out, const float* __restrict__ table,
                                 const int64_t* __restrict__ indices, int num_indices, int num_embeddings,
                                 int dim) {
  const int i = blockIdx.x;
  if (i >= num_indices) return;
  const int64_t idx = indices[i];
  assert(idx >= 0 && idx < num_embeddings && "index out of range in embedding_gather");
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[(int64_t)i * dim + d] = table[idx * dim + d];
}
