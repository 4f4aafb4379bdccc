// core/random.cpp — the default generator and counter reservation (relative to a capture's
// first draw inside a CUDA graph capture: core/graph_capture.h).
#include "memgrad/core/random.h"

#include "memgrad/core/graph_capture.h"

namespace mg {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

PhiloxState Generator::reserve(int64_t numel, Device consumer) {
  if (!consumer.is_cuda() && graph_capture_underway()) {  // the message is built only when refusing
    refuse_during_graph_capture("a random draw for " + consumer.str(),
                                "a captured step replays only its CUDA work; draw host random numbers outside it.");
  }
  PhiloxState start;
  {
    std::lock_guard lock(mutex_);
    start = {seed_, offset_};
    offset_ += static_cast<uint64_t>(numel);
  }
  if (graph_warmup_underway() && consumer.is_cuda()) warmup_draw(*this, consumer);
  return graph_capture_underway() ? captured_draw(*this, start, consumer) : start;
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
