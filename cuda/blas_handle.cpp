// cuda/blas_handle.cpp — per-thread cuBLAS handles and per-stream workspaces (see the header).
#include "cuda/blas_handle.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "cuda/check.h"
#include "cuda/runtime.h"

namespace mg::cuda {

namespace {

// Handles of threads that have ended, per device, for the next thread to reuse.
// NOTE: leaked on purpose (as is every handle and workspace): threads may end, and return
// their handles, during static destruction, and destroying a handle after the CUDA
// context is gone would fail. The driver frees everything at process exit.
struct HandlePool {
  std::mutex mutex;
  std::array<std::vector<cublasHandle_t>, kMaxDevices> free;
};
HandlePool& handle_pool() {
  static auto* pool = new HandlePool;
  return *pool;
}

struct ThreadHandles {
  std::array<cublasHandle_t, kMaxDevices> handles{};
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (handles[d] != nullptr) pool.free[d].push_back(handles[d]);
    }
  }
};
thread_local ThreadHandles thread_handles;

cublasHandle_t handle_for(Device device) {
  MG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices, "cuBLAS: ", device,
           " is not a CUDA device memgrad can use");
  cublasHandle_t& handle = thread_handles.handles[device.index];
  if (handle != nullptr) return handle;
  {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    std::vector<cublasHandle_t>& free = pool.free[device.index];
    if (!free.empty()) {
      handle = free.back();
      free.pop_back();
      return handle;
    }
  }
  MG_CUBLAS_CHECK(cublasCreate(&handle));
  return handle;
}

// One workspace per (device, stream): two streams running matmuls at once must not share
// scratch memory. A stream's workspace is allocated on that stream, so the caching
// allocator's stream ordering covers it.
struct Workspaces {
  std::mutex mutex;
  std::map<std::pair<int, cudaStream_t>, Tensor> by_stream;
};
Workspaces& workspaces() {
  static auto* all = new Workspaces;  // NOTE: leaked on purpose, like the handles
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
    known = major >= 9 ? size_t{32} << 20 : size_t{8} << 20;
    bytes[device.index].store(known, std::memory_order_relaxed);
  }
  return known;
}

cublasHandle_t blas_handle(Device device, cudaStream_t stream) {
  cublasHandle_t handle = handle_for(device);
  // NOTE: cublasSetStream resets the handle's workspace to cuBLAS's own pool, so the
  // workspace is set again after it, at every call (both only store pointers).
  MG_CUBLAS_CHECK(cublasSetStream(handle, stream));
  MG_CUBLAS_CHECK(cublasSetWorkspace(handle, blas_workspace(device, stream), blas_workspace_bytes(device)));
  return handle;
}

}  // namespace mg::cuda
