// cj-corpus: name=complex_mul_conj args=c64[512],c64[512],c64[512],i32
// Pointwise spectrum product x * conj(h) with <cuComplex.h>, as cuFFT-based convolution and
// correlation code writes it between the forward and inverse transforms.
#include <cuComplex.h>

__global__ void complex_mul_conj(cuFloatComplex* out, const cuFloatComplex* x, const cuFloatComplex* h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = cuCmulf(x[i], cuConjf(h[i]));
}
