// memory/memory_cap.cpp — the cap on a device's reserved bytes, set on its caching allocator.
#include "memgrad/memory/memory_cap.h"

#include <algorithm>
#include <cmath>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"

namespace mg::memory {

void set_memory_cap(Device device, size_t bytes) {
  MG_CHECK(bytes > 0 && bytes != CachingAllocator::kNoReservedLimit, "set_memory_cap(", device, ", ", bytes,
           "): the cap must be a positive number of bytes. Hint: remove_memory_cap lifts a cap.");
  allocator_for(device).set_reserved_limit(bytes);
}

void set_memory_fraction(Device device, double fraction) {
  MG_CHECK(std::isfinite(fraction) && fraction > 0 && fraction <= 1, "set_memory_fraction(", device, ", ", fraction,
           "): the fraction must be in (0, 1].");
  const size_t capacity = allocator_for(device).backend().capacity();
  MG_CHECK(capacity > 0, "set_memory_fraction(", device, ", ", fraction, "): the size of ", device,
           "'s memory is not known to memgrad, so a fraction of it means nothing. Hint: give the cap in bytes with "
           "set_memory_cap.");
  set_memory_cap(device, std::max<size_t>(1, static_cast<size_t>(fraction * static_cast<double>(capacity))));
}

void remove_memory_cap(Device device) { allocator_for(device).set_reserved_limit(CachingAllocator::kNoReservedLimit); }

std::optional<size_t> memory_cap(Device device) {
  const size_t limit = allocator_for(device).reserved_limit();
  if (limit == CachingAllocator::kNoReservedLimit) return std::nullopt;
  return limit;
}

}  // namespace mg::memory
