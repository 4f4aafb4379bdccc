// cuda/blas_handle.cpp — per-thread cuBLAS handles and per-stream workspaces (see the header).
#include "memgrad/cuda/blas_handle.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/handle_pool.h"
#include "memgrad/cuda/plan/blas_workspace.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// One workspace per (device, stream): two streams running matmuls at once must not share
// scratch memory. A stream's workspace is allocated on that stream, so the caching
// allocator's stream ordering covers it.
struct Workspaces {
  std::mutex mutex;
  std::map<std::pair<int, cudaStream_t>, Tensor> by_stream;
};
Workspaces& workspaces() {
  // NOTE: leaked on purpose, like the handles (cuda/handle_pool.h): a thread may end during
  // static destruction, after the CUDA context is gone.
  static auto* all = new Workspaces;
  return *all;
}

}  // namespace

void* blas_workspace(Device device, cudaStream_t stream) {
  // The last answer, per thread: the common case (one stream) costs no lock.
  thread_local int last_device = -1;
  thread_local cudaStream_t last_stream = nullptr;
  thread_local void* last_workspace = nullptr;
  if (last_workspace != nullptr && last_device == device.index && last_stream == stream) return last_workspace;

  Workspaces& all = workspaces();
  std::lock_guard lock(all.mutex);
  auto [entry, inserted] = all.by_stream.try_emplace({device.index, stream});
  if (inserted) {
    auto bytes = static_cast<int64_t>(blas_workspace_bytes(device));
    entry->second = empty({bytes}, {.dtype = DType::UInt8, .device = device, .category = MemoryCategory::Workspace});
  }
  last_device = device.index;
  last_stream = stream;
  last_workspace = entry->second.raw_data();
  return last_workspace;
}

size_t blas_workspace_bytes(Device device) {
  MG_ASSERT(device.index >= 0 && device.index < kMaxDevices, "CUDA device index ", device.index, " out of range");
  static std::array<std::atomic<size_t>, kMaxDevices> bytes{};  // 0: not asked yet
  size_t known = bytes[device.index].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    MG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index));
    known = blas_workspace_bytes_for_capability(major);
    bytes[device.index].store(known, std::memory_order_relaxed);
  }
  return known;
}

cublasHandle_t blas_handle(Device device, cudaStream_t stream) {
  cublasHandle_t handle = thread_handle<cublasHandle_t>(device, "cuBLAS", [] {
    cublasHandle_t created = nullptr;
    MG_CUBLAS_CHECK(cublasCreate(&created));
    return created;
  });
  // NOTE: cublasSetStream resets the handle's workspace to cuBLAS's own pool, so the
  // workspace is set again after it, at every call (both only store pointers).
  MG_CUBLAS_CHECK(cublasSetStream(handle, stream));
  MG_CUBLAS_CHECK(cublasSetWorkspace(handle, blas_workspace(device, stream), blas_workspace_bytes(device)));
  return handle;
}

}  // namespace mg::cuda
