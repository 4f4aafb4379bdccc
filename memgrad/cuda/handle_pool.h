// cuda/handle_pool.h — one library handle (cuBLAS, cuDNN) per (thread, device).
//
// A handle holds per-call state, so two threads must not use one at once; creating one is
// slow (it allocates on the device), so a thread creates its handle at its first call and,
// when it ends, leaves it in a pool for the next thread on that device to take.
#pragma once

#include <array>
#include <mutex>
#include <vector>

#include "memgrad/core/device.h"
#include "memgrad/core/error.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace handle_pool_detail {

// Handles of threads that have ended, per device.
// NOTE: leaked on purpose: a thread may end, and return its handles, during static
// destruction, after the CUDA context is gone, when destroying a handle would fail. The
// driver frees everything at process exit.
template <class Handle>
struct FreeHandles {
  std::mutex mutex;
  std::array<std::vector<Handle>, kMaxDevices> by_device;

  static FreeHandles& get() {
    static auto* pool = new FreeHandles;
    return *pool;
  }
};

template <class Handle>
struct ThreadHandles {
  std::array<Handle, kMaxDevices> by_device{};

  // NOTE: a function's thread_local, not a thread_local variable template: built by GCC 12,
  // the latter's destructor did not run when its thread ended, so no handle came back.
  static ThreadHandles& mine() {
    thread_local ThreadHandles handles;
    return handles;
  }

  ~ThreadHandles() {
    FreeHandles<Handle>& pool = FreeHandles<Handle>::get();
    std::lock_guard lock(pool.mutex);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (by_device[d] != nullptr) pool.by_device[d].push_back(by_device[d]);
    }
  }
};

}  // namespace handle_pool_detail

// The calling thread's handle for `device`: its own, else one an ended thread left, else a
// new one from `create()` (which binds it to the current CUDA device, so that must be
// `device`). `library` names the library in the error for a device memgrad cannot use.
template <class Handle, class Create>
Handle thread_handle(Device device, const char* library, Create create) {
  using namespace handle_pool_detail;
  MG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices, library, ": ", device,
           " is not a CUDA device memgrad can use");
  Handle& handle = ThreadHandles<Handle>::mine().by_device[device.index];
  if (handle != nullptr) return handle;
  {
    FreeHandles<Handle>& pool = FreeHandles<Handle>::get();
    std::lock_guard lock(pool.mutex);
    std::vector<Handle>& free = pool.by_device[device.index];
    if (!free.empty()) {
      handle = free.back();
      free.pop_back();
      return handle;
    }
  }
  handle = create();
  return handle;
}

}  // namespace mg::cuda
