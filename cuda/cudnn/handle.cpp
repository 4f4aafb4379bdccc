// cuda/cudnn/handle.cpp — per-thread cuDNN handles (see the header).
#include "cuda/cudnn/handle.h"

#include <array>
#include <mutex>
#include <vector>

#include "cuda/cudnn/check.h"
#include "cuda/runtime.h"

namespace mg::cuda {

namespace {

// Handles of threads that have ended, per device, for the next thread to reuse.
// NOTE: leaked on purpose, as cuda/blas_handle.cpp's are: a thread may end during static
// destruction, after the CUDA context is gone, when cudnnDestroy would fail. The driver
// frees everything at process exit.
struct HandlePool {
  std::mutex mutex;
  std::array<std::vector<cudnnHandle_t>, kMaxDevices> free;
};
HandlePool& handle_pool() {
  static auto* pool = new HandlePool;
  return *pool;
}

struct ThreadHandles {
  std::array<cudnnHandle_t, kMaxDevices> handles{};
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (handles[d] != nullptr) pool.free[d].push_back(handles[d]);
    }
  }
};
thread_local ThreadHandles thread_handles;

}  // namespace

cudnnHandle_t cudnn_handle(Device device, cudaStream_t stream) {
  MG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices, "cuDNN: ", device,
           " is not a CUDA device memgrad can use");
  cudnnHandle_t& handle = thread_handles.handles[device.index];
  if (handle == nullptr) {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    std::vector<cudnnHandle_t>& free = pool.free[device.index];
    if (!free.empty()) {
      handle = free.back();
      free.pop_back();
    }
  }
  if (handle == nullptr) MG_CUDNN_CHECK(cudnnCreate(&handle));
  MG_CUDNN_CHECK(cudnnSetStream(handle, stream));
  return handle;
}

}  // namespace mg::cuda
