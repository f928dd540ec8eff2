// cj-corpus: name=poly_eval args=f32[1024],f32[1024],i32
// Polynomial coefficients in constant memory, set by the host before the launch (cudaMemcpyToSymbol
// in nvcc projects; kernel.get_global(...).copy_() here), evaluated with Horner's rule.
__constant__ float coeffs[4];

__global__ void poly_eval(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc = coeffs[3];
#pragma unroll
  for (int k = 2; k >= 0; --k) acc = acc * v + coeffs[k];
  out[i] = acc;
}
