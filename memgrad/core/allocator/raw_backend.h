// core/allocator/raw_backend.h — where the caching allocator gets its segments from.
//
// One caching algorithm serves every device; only this small interface differs: host
// memory (64-byte aligned malloc), cudaMalloc (in cuda/), or a simulated device that hands
// out addresses without memory and has a configurable capacity.
//
// Devices that run work asynchronously on streams (CUDA) also supply events, so that the
// allocator can hold back a freed block that another stream may still be using (see
// CachingAllocator::record_stream). The defaults describe a device without streams: no
// event is ever needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mg {

// A CUDA stream's identity as seen by the allocator (0: the default stream; the CPU and the
// simulated device only use 0).
using StreamId = uintptr_t;

class RawBackend {
 public:
  virtual ~RawBackend() = default;

  // Returns nullptr when the memory is not available (the allocator then frees its cache
  // and retries, and finally raises OutOfMemoryError). Never throws for lack of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;

  // Total bytes this backend may hand out; 0 when unbounded or unknown.
  virtual size_t capacity() const = 0;
  // One line about the device's memory for error messages and summaries
  // (e.g. "capacity 64.00 MiB" or NVML's free/total).
  virtual std::string describe_memory() const = 0;
  // Whether returned pointers may be dereferenced (false for the simulated device).
  virtual bool has_storage() const { return true; }
  // Whether this is page-locked host memory that a device copies from and to
  // asynchronously (CUDA's pinned memory).
  virtual bool is_pinned() const { return false; }

  // ---- events (for stream-aware reuse; the caching allocator calls these under its lock) ----
  // Marks "everything enqueued on `stream` so far" and returns an opaque handle to that
  // mark, or nullptr when the backend needs no events (the block may then be reused at
  // once).
  virtual void* record_event(StreamId stream) { return nullptr; }
  // Whether the work before the mark has completed. Does not block.
  virtual bool event_done(void* event) { return true; }
  // Blocks the calling thread until the work before the mark has completed.
  virtual void synchronize_event(void* event) {}
  // Releases an event from record_event (done or not).
  virtual void destroy_event(void* event) {}
};

}  // namespace mg
