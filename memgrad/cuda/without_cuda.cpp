// cuda/without_cuda.cpp — cuda/cuda.h's answers in a build without CUDA: no devices.
// Built only when MG_WITH_CUDA is off (CMakeLists.txt); a CUDA build defines these in
// cuda/runtime.cpp.
#include "memgrad/cuda/cuda.h"

#include <atomic>

#include "memgrad/core/error.h"

namespace mg::cuda {

namespace {
std::atomic<bool> allow_tf32_flag{false};
}  // namespace

int device_count() { return 0; }

bool is_available() { return false; }

void synchronize(Device device) {
  MG_CHECK(false, "cuda::synchronize(", device, "): memgrad was built without CUDA support. Hint: rebuild "
           "with -DMG_WITH_CUDA=ON (needs the CUDA toolkit), or ask cuda::is_available() first.");
}

void set_allow_tf32(bool allow) { allow_tf32_flag.store(allow, std::memory_order_relaxed); }

bool allow_tf32() { return allow_tf32_flag.load(std::memory_order_relaxed); }

}  // namespace mg::cuda
