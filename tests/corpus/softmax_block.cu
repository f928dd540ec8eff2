// cj-corpus: name=softmax_block args=f32[4096],f32[4096],i32
// Block-per-row softmax with a shared-memory reduction, seeded with -FLT_MAX.
#include <cfloat>
#include <cmath>

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) softmax_block(float* output, const float* input, int dim) {
  __shared__ float sdata[kThreads];
  const int tid = threadIdx.x;
  const float* row_in = input + blockIdx.x * dim;
  float* row_out = output + blockIdx.x * dim;

  float local_max = -FLT_MAX;
  for (int i = tid; i < dim; i += blockDim.x) local_max = fmaxf(local_max, row_in[i]);
  sdata[tid] = local_max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
    __syncthreads();
  }
  const float max_val = sdata[0];
  __syncthreads();

  float local_sum = 0.0f;
  for (int i = tid; i < dim; i += blockDim.x) {
    float e = __expf(row_in[i] - max_val);
    row_out[i] = e;
    local_sum += e;
  }
  sdata[tid] = local_sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  const float sum = sdata[0];
  for (int i = tid; i < dim; i += blockDim.x) row_out[i] /= sum;
}
