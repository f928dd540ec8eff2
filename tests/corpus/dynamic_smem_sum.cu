// cj-corpus: name=block_partial_sums args=f32[4096],f32[16],i32
// The CUDA samples' reduction kernel ("first add during load"): per-block partial sums in shared
// memory sized at launch (extern __shared__, blockDim.x floats), blockDim.x a power of two.
__global__ void block_partial_sums(const float* __restrict__ in, float* __restrict__ out, unsigned int n) {
  extern __shared__ float sdata[];
  const unsigned int tid = threadIdx.x;
  const unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
  float sum = (i < n) ? in[i] : 0.0f;
  if (i + blockDim.x < n) sum += in[i + blockDim.x];
  sdata[tid] = sum;
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
