// cj-corpus: name=bias_gelu_fwd args=f32[1024],f32[1024],f32[64],i32,i32
// Element type chosen by a macro (`#define scalar_t float`, as in hand-specialized copies of
// PyTorch's AT_DISPATCH bodies) and a parameter list continued over lines with backslashes, as
// kernels generated or declared inside macros are.
#include <cmath>

#define scalar_t float
#define RESTRICT __restrict__
#define BIAS_GELU_PARAMS scalar_t* RESTRICT out, \
                         const scalar_t* RESTRICT in, \
                         const scalar_t* RESTRICT bias

__global__ void bias_gelu_fwd(BIAS_GELU_PARAMS, \
                              int rows, \
                              int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const scalar_t v = in[i] + bias[i % cols];
  out[i] = scalar_t(0.5) * v * (scalar_t(1) + erff(v * scalar_t(M_SQRT1_2)));
}
