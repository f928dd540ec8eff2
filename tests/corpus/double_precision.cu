// cj-corpus: name=relative_error_f64 args=f64[1024],f64[1024],f64[1024],i32
// Double-precision relative error with std::abs, std::fmax and DBL_EPSILON/DBL_MAX.
#include <cmath>
#include <cfloat>

__global__ void relative_error_f64(double* err, const double* actual, const double* expected, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = actual[i], e = expected[i];
  double denom = std::fmax(std::abs(e), DBL_EPSILON);
  double r = std::abs(a - e) / denom;
  if (std::isnan(r)) r = DBL_MAX;
  err[i] = std::fmin(r, DBL_MAX) + 0.0 * std::exp(-std::sqrt(std::fabs(e))) + 0.0 * std::log1p(DBL_MIN);
}
