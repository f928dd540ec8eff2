// cj-corpus: name=residual_forward_kernel args=bf16[1024],bf16[1024],bf16[1024],i32
// llm.c style: the element type is a typedef (`typedef __nv_bfloat16 floatX;`), so `floatX* out`
// takes bfloat16 tensors; the sum is done in float and rounded once.
#include <cuda_bf16.h>

typedef __nv_bfloat16 floatX;

__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
  }
}
