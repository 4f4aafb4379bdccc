// cuda/cuda_allocator_backend.h — the caching allocator's raw backend for a CUDA device:
// segments from cudaMalloc, capped by a memory fraction, and the events behind the
// allocator's stream-aware reuse (record_stream).
//
// NOTE: cudaFree synchronises the whole device, which is the reason the caching allocator
// exists: segments are cudaMalloc'ed once and cached, and cudaFree runs only when the cache
// is emptied (empty_cache, or the retry before an out-of-memory error).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "memgrad/core/allocator/raw_backend.h"
#include "memgrad/core/device.h"

namespace mg::cuda {

class CudaAllocatorBackend final : public RawBackend {
 public:
  // Checks that the device exists and reads its total memory.
  explicit CudaAllocatorBackend(Device device);

  // nullptr when cudaMalloc reports no memory or the request would take memgrad past the
  // memory fraction; other CUDA errors throw.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  // The device's total memory times the memory fraction.
  size_t capacity() const override;
  // "cuda:0: 12.30 GiB free of 139.80 GiB (cudaMemGetInfo)", the fraction when below 1,
  // and NVML's used/total of all processes ("NVML unavailable" without libnvidia-ml).
  std::string describe_memory() const override;

  void* record_event(StreamId stream) override;
  bool event_done(void* event) override;
  void synchronize_event(void* event) override;
  void destroy_event(void* event) override;

  void set_memory_fraction(double fraction);
  double memory_fraction() const { return fraction_.load(std::memory_order_relaxed); }
  size_t total_bytes() const { return total_bytes_; }
  // Bytes this backend holds from cudaMalloc.
  size_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }

 private:
  Device device_;
  size_t total_bytes_ = 0;
  // Atomic: set and read from user threads while the allocator (under its lock) allocates.
  std::atomic<double> fraction_{1.0};
  std::atomic<size_t> used_bytes_{0};
};

// Lets memgrad's allocator on `device` hold at most `fraction` of the device's total
// memory (PyTorch's set_per_process_memory_fraction); beyond it allocations fail with
// OutOfMemoryError, as when the device is full. 0 < fraction <= 1; default 1.
void set_memory_fraction(double fraction, Device device = Device::cuda());
double memory_fraction(Device device = Device::cuda());

// The events of the allocators' stream-aware reuse, shared by the device and the pinned
// backends: an event recorded on `stream` (an allocator StreamId) of device `device`.
void* record_allocator_event(StreamId stream, int device);
bool allocator_event_done(void* event);
void synchronize_allocator_event(void* event);
void destroy_allocator_event(void* event) noexcept;

}  // namespace mg::cuda
