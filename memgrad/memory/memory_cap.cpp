// memory/memory_cap.cpp — the cap on a device's reserved bytes, set on its caching allocator.
#include "memgrad/memory/memory_cap.h"

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"

namespace mg::memory {

void set_memory_cap(Device device, size_t bytes) {
  MG_CHECK(bytes > 0 && bytes != CachingAllocator::kNoReservedLimit, "set_memory_cap(", device, ", ", bytes,
           "): the cap must be a positive number of bytes. Hint: remove_memory_cap lifts a cap.");
  allocator_for(device).set_reserved_limit(bytes);
}

void remove_memory_cap(Device device) { allocator_for(device).set_reserved_limit(CachingAllocator::kNoReservedLimit); }

std::optional<size_t> memory_cap(Device device) {
  const size_t limit = allocator_for(device).reserved_limit();
  if (limit == CachingAllocator::kNoReservedLimit) return std::nullopt;
  return limit;
}

}  // namespace mg::memory
