// examples/common/deterministic.cpp — the usage lines of --deterministic.
#include "examples/common/deterministic.h"

namespace examples {

std::string deterministic_usage() {
  return R"(  --deterministic          on CUDA, add in a fixed order where kernels would use float
                           atomics (embedding and attention backward) and keep cuDNN to
                           its deterministic engines, so that a run repeats bit for bit
                           (mg::set_deterministic_algorithms; slower, and attention's
                           backward borrows one dQ per block of keys)
)";
}

}  // namespace examples
