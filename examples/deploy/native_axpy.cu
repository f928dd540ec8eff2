// The baseline of the deploy benchmark: the same axpy kernel compiled by nvcc and launched
// with <<<>>>, the cheapest launch CUDA C++ offers.
#include <cuda_runtime.h>

namespace {
__global__ void axpy_native(float* out, const float* x, const float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
}  // namespace

/// Launches axpy_native on `stream`; returns cudaGetLastError() of the launch.
int launch_native_axpy(float* out, const float* x, const float* y, float a, long long n, int grid,
                       int block, void* stream) {
  axpy_native<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(out, x, y, a, n);
  return static_cast<int>(cudaGetLastError());
}
