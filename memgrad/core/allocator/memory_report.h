// core/allocator/memory_report.h — the words and tables the caching allocator shows people:
// the out-of-memory explanation and memory_summary(). Kept apart from the algorithm so that
// caching_allocator.cpp reads as the block pool only. Internal to core/allocator/.
#pragma once

#include <cstddef>
#include <string>

#include "memgrad/core/allocator/memory_stats.h"
#include "memgrad/core/allocator/raw_backend.h"
#include "memgrad/core/device.h"

namespace mg {

// What OutOfMemoryError says: the device, what was asked for and what it rounded to, the
// backend's view of the memory, the reserve limit when one is set (SIZE_MAX: none),
// allocated vs reserved, requested bytes by category, and what to try next.
std::string out_of_memory_message(Device device, const RawBackend& backend,
                                  const MemoryStats& stats, size_t requested_bytes,
                                  size_t rounded_bytes, size_t segment_bytes, size_t reserved_limit);

// Appends one printf-formatted line (and a newline) to `out`; the report tables are built
// from such lines (also by memory/snapshot.cpp).
void append_line(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The table behind CachingAllocator::memory_summary().
std::string format_memory_summary(Device device, const RawBackend& backend,
                                  const MemoryStats& stats);

}  // namespace mg
