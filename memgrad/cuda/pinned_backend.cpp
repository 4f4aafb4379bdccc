// cuda/pinned_backend.cpp — cudaHostAlloc/cudaFreeHost behind the pinned host allocator.
#include "memgrad/cuda/pinned_backend.h"

#include <memory>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/cuda_allocator_backend.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

void* PinnedBackend::allocate(size_t bytes) {
  void* ptr = nullptr;
  // Portable: pinned for every device of the process, not only the current one.
  const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it, so the next check reports its own problem
    return nullptr;
  }
  MG_CUDA_CHECK(status);
  used_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return ptr;
}

void PinnedBackend::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  MG_CUDA_CHECK(cudaFreeHost(ptr));
  used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

std::string PinnedBackend::describe_memory() const {
  return "pinned host memory (cudaHostAlloc), used " +
         format_bytes(static_cast<int64_t>(used_bytes()));
}

void* PinnedBackend::record_event(StreamId stream) {
  // NOTE: a stream other than the legacy default one knows its device. StreamId 0 names
  // the legacy default stream of whichever device is current, so with several GPUs a
  // pinned block used on device N's default stream is waited for on the current device's;
  // use a created Stream there to be exact.
  int device = 0;
  if (stream != 0) {
    MG_CUDA_CHECK(cudaStreamGetDevice(reinterpret_cast<cudaStream_t>(stream), &device));
  } else {
    MG_CUDA_CHECK(cudaGetDevice(&device));
  }
  return record_allocator_event(stream, device);
}

bool PinnedBackend::event_done(void* event) { return allocator_event_done(event); }
void PinnedBackend::synchronize_event(void* event) { synchronize_allocator_event(event); }
void PinnedBackend::destroy_event(void* event) { destroy_allocator_event(event); }

CachingAllocator& pinned_host_allocator() {
  MG_CHECK(is_available(), "pinned host memory needs a CUDA device, and none is visible (no "
           "GPU, no driver, or CUDA_VISIBLE_DEVICES hides them). Hint: leave pin_memory off "
           "when running on the CPU.");
  // NOTE: leaked on purpose, like the registry's allocators: tensors destroyed during static
  // destruction must still find it, and cudaFreeHost must not run after CUDA shut down.
  static CachingAllocator* const allocator =
      new CachingAllocator(Device::cpu(), std::make_unique<PinnedBackend>(), caching_from_environment());
  return *allocator;
}

}  // namespace mg::cuda
