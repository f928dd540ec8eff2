// cj-corpus: name=scale_shift_float4 args=f32[1024],f32[1024],f32,f32,i32
// Vectorized elementwise kernel taking float4 pointers directly (the tensors hold whole float4s),
// as bandwidth-bound kernels in many CUDA samples and inference engines do.
__global__ void scale_shift_float4(float4* __restrict__ out, const float4* __restrict__ in, float scale, float shift,
                                   int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const float4 v = in[i];
  out[i] = make_float4(v.x * scale + shift, v.y * scale + shift, v.z * scale + shift, v.w * scale + shift);
}
