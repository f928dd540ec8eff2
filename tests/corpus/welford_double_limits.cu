// cj-corpus: name=column_stats args=f64[4096],f64[64],f64[64],i32,i32
// Column mean and sample variance in double, flagging degenerate columns with NaN.
#include <limits>
#include <cmath>
#include <cstdio>

__global__ void column_stats(const double* __restrict__ x, double* __restrict__ mean,
                             double* __restrict__ var, int rows, int cols) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  double m = 0.0, m2 = 0.0;
  for (int r = 0; r < rows; ++r) {
    double v = x[static_cast<long long>(r) * cols + col];
    double delta = v - m;
    m += delta / (r + 1);
    m2 += delta * (v - m);
  }
  mean[col] = m;
  var[col] = rows > 1 ? m2 / (rows - 1) : std::numeric_limits<double>::quiet_NaN();
  if (rows > 1 && std::abs(var[col]) < std::numeric_limits<double>::denorm_min())
    printf("column %d is constant\n", col);
}
