// cj-corpus: name=particles_advance args=u8[2048],i32,f32
// Array-of-structs particle update over a raw byte buffer, addressing fields with offsetof.
#include <cstddef>
#include <cstdint>
#include <cstring>

struct Particle {
  float pos[3];
  float vel[3];
  uint32_t flags;
};

__global__ void particles_advance(uint8_t* buffer, int count, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  uint8_t* base = buffer + static_cast<std::size_t>(i) * sizeof(Particle);
  float pos[3], vel[3];
  std::memcpy(pos, base + offsetof(Particle, pos), sizeof(pos));
  std::memcpy(vel, base + offsetof(Particle, vel), sizeof(vel));
  for (int k = 0; k < 3; ++k) pos[k] += dt * vel[k];
  std::memcpy(base + offsetof(Particle, pos), pos, sizeof(pos));
  static_assert(offsetof(Particle, flags) == 6 * sizeof(float), "packed layout");
}
