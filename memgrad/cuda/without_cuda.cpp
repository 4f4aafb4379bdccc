// cuda/without_cuda.cpp — the cuda room's public answers in a build without CUDA: no
// devices (cuda/cuda.h), and a CapturedStep (cuda/captured_step.h) that explains why it
// cannot be made. Built only when MG_WITH_CUDA is off (CMakeLists.txt); a CUDA build
// defines these in cuda/runtime.cpp and cuda/captured_step.cpp.
#include "memgrad/cuda/cuda.h"
#include "memgrad/cuda/captured_step.h"

#include <atomic>

#include "memgrad/core/error.h"

namespace mg::cuda {

namespace {
std::atomic<bool> allow_tf32_flag{false};
std::atomic<bool> dependent_launch_flag{false};
}  // namespace

int device_count() { return 0; }

bool is_available() { return false; }

void synchronize(Device device) {
  MG_CHECK(false, "cuda::synchronize(", device, "): memgrad was built without CUDA support. Hint: rebuild "
           "with -DMG_WITH_CUDA=ON (needs the CUDA toolkit), or ask cuda::is_available() first.");
}

void set_allow_tf32(bool allow) { allow_tf32_flag.store(allow, std::memory_order_relaxed); }

bool allow_tf32() { return allow_tf32_flag.load(std::memory_order_relaxed); }

void set_dependent_launch(bool allow) { dependent_launch_flag.store(allow, std::memory_order_relaxed); }

bool dependent_launch() { return dependent_launch_flag.load(std::memory_order_relaxed); }

ProfilerRange::ProfilerRange() = default;

ProfilerRange::~ProfilerRange() = default;

// Never made in this build: the constructor throws, so the other members cannot be reached.
struct CapturedStep::Graph {};

CapturedStep::CapturedStep(std::function<void()> /*step*/, CaptureOptions options) {
  MG_CHECK(false, "CapturedStep on ", options.device, ": memgrad was built without CUDA support, and "
           "CUDA graphs need it. Hint: rebuild with -DMG_WITH_CUDA=ON, or run the step eagerly.");
}

CapturedStep::~CapturedStep() = default;

void CapturedStep::replay() { MG_ASSERT(false, "CapturedStep::replay without CUDA"); }

size_t CapturedStep::pool_bytes() const { return 0; }

int64_t CapturedStep::replays() const { return 0; }

}  // namespace mg::cuda
