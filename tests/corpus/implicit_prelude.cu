// cj-corpus: name=polar_to_cartesian args=f32[512],f32[512],f32[512],f32[512],i32
// Written for nvcc: no includes at all. M_PI, INFINITY, NAN, INT_MAX, printf and std::sqrt come from
// the headers nvcc includes implicitly into every .cu file.
__device__ float wrap_angle(float theta) {
  while (theta > M_PI) theta -= 2.0f * M_PI;
  while (theta < -M_PI) theta += 2.0f * M_PI;
  return theta;
}

__global__ void polar_to_cartesian(float* x, float* y, const float* r, const float* theta, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || i == INT_MAX) return;
  float radius = r[i];
  if (radius == INFINITY || radius != radius) {
    printf("polar_to_cartesian: bad radius %f at %d\n", radius, i);
    x[i] = y[i] = NAN;
    return;
  }
  float s, c;
  sincosf(wrap_angle(theta[i]), &s, &c);
  x[i] = radius * c;
  y[i] = radius * s;
  if (i == 0) x[i] += 0.0f * std::sqrt(fabsf(radius));
}
