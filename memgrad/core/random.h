// core/random.h — seeded random numbers: a Philox4x32-10 counter-based generator.
//
// NOTE: counter-based (rather than a sequential engine like mt19937) so that element i of a
// random tensor depends only on (seed, offset, i): the CPU and CUDA kernels produce the
// same numbers, threads need no shared state, and checkpointing can replay dropout exactly
// by restoring (seed, offset).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "memgrad/core/host_device.h"
#include "memgrad/core/kernels.h"

// Philox and the uniform helpers are shared with the CUDA kernels (same numbers there).

namespace mg {

// Philox4x32-10: 4 random 32-bit words from a 128-bit counter and a 64-bit key.
MG_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t seed) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * counter[0];
    uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * counter[2];
    counter = {static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key0,
               static_cast<uint32_t>(product1),
               static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key1,
               static_cast<uint32_t>(product0)};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// The 4 words for block `index` of a stream that starts at `state.offset` — past the
// replay's base offset, with the replay's seed, in a captured CUDA kernel.
MG_HOST_DEVICE inline std::array<uint32_t, 4> philox_block(PhiloxState state, uint64_t index) {
#if defined(__CUDA_ARCH__)
  if (state.captured_base != nullptr) {
    state.seed = state.captured_base[0];
    state.offset += state.captured_base[1];
  }
#endif
  uint64_t counter = state.offset + index;
  return philox4x32({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0},
                    state.seed);
}

// A uniform float in [0, 1) from 24 random bits (exactly representable).
MG_HOST_DEVICE inline float uniform_from_bits(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
// A uniform double in [0, 1) from 53 random bits.
MG_HOST_DEVICE inline double uniform_double_from_bits(uint32_t high, uint32_t low) {
  uint64_t bits = (static_cast<uint64_t>(high) << 21) ^ (low >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Seed plus a running offset: each random tensor reserves the counter range it uses.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  // Reserves one Philox block per value for `numel` values, drawn by a kernel on
  // `consumer`, and returns where they start.
  // NOTE: one block (4 words) per value wastes some words but lets every dtype and
  // distribution (normal needs two uniforms) index its block by element position alone.
  // During a CUDA graph capture on this thread (core/graph_capture.h), a CUDA consumer
  // gets its offset relative to the capture's first draw from this generator, and the
  // device word pair that each replay fills with {seed, base}; a CPU consumer is refused,
  // since its draw would happen once, at capture, instead of at every replay.
  PhiloxState reserve(int64_t numel, Device consumer);

  // Saved and restored by checkpointing to replay dropout.
  PhiloxState state() const;
  void set_state(PhiloxState state);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when none is given.
Generator& default_generator();
// Seeds the default generator (like torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace mg
