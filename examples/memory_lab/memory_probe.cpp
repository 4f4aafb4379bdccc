// examples/memory_lab/memory_probe.cpp — differences of allocator snapshots.
#include "examples/memory_lab/memory_probe.h"

namespace memory_lab {

MemoryProbe::MemoryProbe(mg::Device device) : device_(device) { restart(); }

void MemoryProbe::restart() {
  mg::memory::reset_peak_stats(device_);
  start_ = mg::memory::snapshot(device_);
}

void MemoryProbe::reset_peaks() { mg::memory::reset_peak_stats(device_); }

int64_t MemoryProbe::current(mg::MemoryCategory category) const {
  return mg::memory::snapshot(device_).category(category).current - start_.category(category).current;
}

int64_t MemoryProbe::peak(mg::MemoryCategory category) const {
  return mg::memory::snapshot(device_).category(category).peak - start_.category(category).current;
}

int64_t MemoryProbe::allocated() const {
  return mg::memory::snapshot(device_).allocated_bytes - start_.allocated_bytes;
}

int64_t MemoryProbe::peak_allocated() const {
  return mg::memory::snapshot(device_).peak_allocated_bytes - start_.allocated_bytes;
}

int64_t MemoryProbe::reserved() const {
  return mg::memory::snapshot(device_).reserved_bytes - start_.reserved_bytes;
}

int64_t MemoryProbe::peak_reserved() const {
  return mg::memory::snapshot(device_).peak_reserved_bytes - start_.reserved_bytes;
}

}  // namespace memory_lab
