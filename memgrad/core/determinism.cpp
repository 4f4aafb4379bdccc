// core/determinism.cpp — the switch (see the header). An atomic: any thread may flip it;
// each kernel launch reads it once.
#include "memgrad/core/determinism.h"

#include <atomic>

namespace mg {

namespace {
std::atomic<bool> deterministic_flag{false};
}  // namespace

void set_deterministic_algorithms(bool deterministic) {
  deterministic_flag.store(deterministic, std::memory_order_relaxed);
}
bool deterministic_algorithms() { return deterministic_flag.load(std::memory_order_relaxed); }

}  // namespace mg
