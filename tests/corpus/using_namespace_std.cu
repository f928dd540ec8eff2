// cj-corpus: name=smooth_l1_loss args=f32[1024],f32[1024],f32[1024],f32,i32
// Written in the `using namespace std;` style: unqualified sqrt, abs, min, max and exp must pick
// one overload, whether CUDA's global ones or std's.
#include <cmath>
#include <algorithm>
#include <limits>
using namespace std;

__global__ void smooth_l1_loss(float* loss, const float* input, const float* target, float beta, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float diff = abs(input[i] - target[i]);
  float l = diff < beta ? 0.5f * diff * diff / beta : diff - 0.5f * beta;
  l = min(l, numeric_limits<float>::max());
  l = max(l, 0.0f) + 0.0f * sqrt(diff) * exp(-diff);
  int clamped = max(min(i, n - 1), 0);
  loss[clamped] = isnan(l) ? 0.0f : l;
}
