// examples/memory_lab/memory_probe.h — MemoryProbe: the bytes a piece of code added, read
// from the caching allocator's statistics (mg::memory::snapshot), relative to a start.
//
//   MemoryProbe probe(device);          // resets the peaks and remembers "now"
//   ... code under test ...
//   probe.peak(mg::MemoryCategory::Activation);  // highest ACTIVATION bytes above the start
//
// Every figure is a difference from the start, so what earlier code left alive (the model,
// the batch) is not counted, and experiments do not disturb each other.
#pragma once

#include <cstdint>

#include <memgrad/core/device.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/memory_category.h>

namespace memory_lab {

class MemoryProbe {
 public:
  explicit MemoryProbe(mg::Device device);

  // Resets the device's peak statistics and takes "now" as the new start.
  void restart();
  // Resets the device's peak statistics but keeps the start, so that a later peak is the
  // highest point of what follows, measured from the same reference.
  void reset_peaks();

  // Requested bytes of `category` now, and at its highest since the start, above the start.
  int64_t current(mg::MemoryCategory category) const;
  int64_t peak(mg::MemoryCategory category) const;
  // The allocator's figures (rounded blocks; segments held), above the start.
  int64_t allocated() const;
  int64_t peak_allocated() const;
  int64_t reserved() const;
  int64_t peak_reserved() const;

 private:
  mg::Device device_;
  mg::memory::Snapshot start_;
};

}  // namespace memory_lab
