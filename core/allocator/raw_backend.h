// core/allocator/raw_backend.h — where the caching allocator gets its segments from.
//
// One caching algorithm serves every device; only this small interface differs: host
// memory (64-byte aligned malloc), cudaMalloc (in cuda/), or a simulated device that hands
// out addresses without memory and has a configurable capacity.
#pragma once

#include <cstddef>
#include <string>

namespace mg {

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
};

}  // namespace mg
