// cj-corpus: name=rotary_embedding_kernel args=f32[4096],i64[16],i32,i32,i32,f32
// Rotary position embedding (GPT-NeoX layout): inverse frequencies from std::pow, applied with sincosf.
#include <cmath>

__global__ void rotary_embedding_kernel(float* __restrict__ query, const int64_t* __restrict__ positions,
                                        const int num_heads, const int head_size, const int rot_dim,
                                        const float base) {
  const int token_idx = blockIdx.x;
  const int64_t pos = positions[token_idx];
  const int embed_dim = rot_dim / 2;
  for (int i = threadIdx.x; i < num_heads * embed_dim; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const int rot_offset = i % embed_dim;
    const float inv_freq = 1.0f / std::pow(base, (2.0f * rot_offset) / rot_dim);
    float sin_v, cos_v;
    sincosf(pos * inv_freq, &sin_v, &cos_v);
    float* q = query + token_idx * num_heads * head_size + head_idx * head_size;
    const float x = q[rot_offset];
    const float y = q[rot_offset + embed_dim];
    q[rot_offset] = x * cos_v - y * sin_v;
    q[rot_offset + embed_dim] = y * cos_v + x * sin_v;
  }
}
