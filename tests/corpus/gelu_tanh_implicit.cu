// cj-corpus: name=gelu_tanh_kernel args=f32[1024],f32[1024],i32
// GELU, tanh approximation. Like most nvcc code it uses M_PI without including anything: nvcc's
// implicit <cuda_runtime.h> brings in the host <math.h>.
__global__ void gelu_tanh_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float x = in[i];
    const float kBeta = sqrtf(2.0f / M_PI);
    const float kKappa = 0.044715f;
    const float inner = kBeta * (x + kKappa * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(inner));
  }
}
