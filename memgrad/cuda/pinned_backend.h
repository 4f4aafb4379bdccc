// cuda/pinned_backend.h — page-locked ("pinned") host memory, and the caching allocator
// that hands it to CPU tensors made with TensorOptions::pin_memory.
//
// A copy between pinned memory and a device runs as DMA without staging, so it can be
// asynchronous (non_blocking): the host thread goes on while the copy runs. Page-locking is
// slow (cudaHostAlloc costs milliseconds for large buffers, cudaFreeHost synchronises the
// device), hence the cache: the same algorithm as every other device's memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/raw_backend.h"

namespace mg::cuda {

class PinnedBackend final : public RawBackend {
 public:
  // nullptr when cudaHostAlloc reports no memory; other CUDA errors throw.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  size_t capacity() const override { return 0; }  // bounded only by the operating system
  std::string describe_memory() const override;
  bool is_pinned() const override { return true; }

  // A pinned block is reused by the CPU, which no stream orders, so the copies that used it
  // are waited for through events (see CachingAllocator::record_stream).
  void* record_event(StreamId stream) override;
  bool event_done(void* event) override;
  void synchronize_event(void* event) override;
  void destroy_event(void* event) override;

  size_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }

 private:
  std::atomic<size_t> used_bytes_{0};
};

// Declared in core/cuda_hooks.h as well (core's factories call it):
// CachingAllocator& pinned_host_allocator();
// Its device is the CPU; its statistics are apart from the CPU's pageable allocator's.

}  // namespace mg::cuda
