// cuda/cudnn/settings.cpp — the convolution switches (see the header). Atomics: any thread
// may flip them; a convolution reads each once per call.
#include "memgrad/cuda/cudnn/settings.h"

#include <atomic>

#include "memgrad/core/determinism.h"

namespace mg::cuda {

namespace {

std::atomic<bool> enabled_flag{true};
std::atomic<bool> benchmark_flag{false};
std::atomic<bool> deterministic_flag{false};
std::atomic<bool> allow_tf32_flag{true};
std::atomic<bool> fusion_flag{true};
std::atomic<bool> backward_fusion_flag{true};
std::atomic<size_t> workspace_limit_bytes{size_t{1} << 30};

}  // namespace

bool cudnn_is_available() {
#if MG_WITH_CUDNN
  return true;
#else
  return false;
#endif
}

void set_cudnn_enabled(bool enabled) { enabled_flag.store(enabled, std::memory_order_relaxed); }
bool cudnn_enabled() { return enabled_flag.load(std::memory_order_relaxed); }

void set_cudnn_benchmark(bool benchmark) { benchmark_flag.store(benchmark, std::memory_order_relaxed); }
bool cudnn_benchmark() { return benchmark_flag.load(std::memory_order_relaxed); }

void set_cudnn_deterministic(bool deterministic) { deterministic_flag.store(deterministic, std::memory_order_relaxed); }
// set_deterministic_algorithms(true) implies it, as torch.use_deterministic_algorithms does.
bool cudnn_deterministic() {
  return deterministic_flag.load(std::memory_order_relaxed) || deterministic_algorithms();
}

void set_cudnn_allow_tf32(bool allow) { allow_tf32_flag.store(allow, std::memory_order_relaxed); }
bool cudnn_allow_tf32() { return allow_tf32_flag.load(std::memory_order_relaxed); }

void set_cudnn_fusion(bool fusion) { fusion_flag.store(fusion, std::memory_order_relaxed); }
bool cudnn_fusion() { return fusion_flag.load(std::memory_order_relaxed); }

void set_cudnn_backward_fusion(bool fusion) { backward_fusion_flag.store(fusion, std::memory_order_relaxed); }
bool cudnn_backward_fusion() { return backward_fusion_flag.load(std::memory_order_relaxed); }

void set_cudnn_workspace_limit(size_t bytes) { workspace_limit_bytes.store(bytes, std::memory_order_relaxed); }
size_t cudnn_workspace_limit() { return workspace_limit_bytes.load(std::memory_order_relaxed); }

}  // namespace mg::cuda
