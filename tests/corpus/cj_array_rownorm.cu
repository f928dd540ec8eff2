// cj-corpus: name=row_rms args=f32[8x64],f32[8],f32
// torch_cudajit style: cj::Array views, with std::sqrt and std::numeric_limits<T>::epsilon().
#include <cmath>
#include <limits>

template <typename T>
__global__ void row_rms(cj::Array<T, 2> out, cj::Array<const T, 1> scale, T eps) {
  const long long row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= out.size(0)) return;
  T acc = T(0);
  for (long long j = 0; j < out.size(1); ++j) acc += out(row, j) * out(row, j);
  const T rms = std::sqrt(acc / static_cast<T>(out.size(1)) + std::max(eps, std::numeric_limits<T>::epsilon()));
  for (long long j = 0; j < out.size(1); ++j) out(row, j) = out(row, j) / rms * scale[row];
}
