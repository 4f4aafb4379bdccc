// core/random.cpp — the default generator and counter reservation.
#include "memgrad/core/random.h"

namespace mg {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

PhiloxState Generator::reserve(int64_t numel) {
  std::lock_guard lock(mutex_);
  PhiloxState start{seed_, offset_};
  offset_ += static_cast<uint64_t>(numel);
  return start;
}

PhiloxState Generator::state() const {
  std::lock_guard lock(mutex_);
  return {seed_, offset_};
}

void Generator::set_state(PhiloxState state) {
  std::lock_guard lock(mutex_);
  seed_ = state.seed;
  offset_ = state.offset;
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace mg
