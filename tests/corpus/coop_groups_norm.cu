// cj-corpus: name=row_l2_normalize args=f32[4096],f32[4096],i32,i32
// L2-normalizes rows with a cooperative_groups tile reduction and std::sqrt.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cmath>

namespace cg = cooperative_groups;

__global__ void row_l2_normalize(float* out, const float* in, int rows, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const int row = blockIdx.x * (blockDim.x / 32) + warp.meta_group_rank();
  if (row >= rows) return;
  float sq = 0.f;
  for (int c = warp.thread_rank(); c < cols; c += warp.size()) {
    float v = in[row * cols + c];
    sq += v * v;
  }
  sq = cg::reduce(warp, sq, cg::plus<float>());
  const float inv_norm = 1.0f / std::max(std::sqrt(sq), 1e-12f);
  for (int c = warp.thread_rank(); c < cols; c += warp.size()) out[row * cols + c] = in[row * cols + c] * inv_norm;
}
