// memory/snapshot.h — mg::memory, the user-facing view of where a device's bytes go.
//
// snapshot() copies the device's caching-allocator statistics into plain numbers: bytes
// held per MemoryCategory (PARAMETER, GRADIENT, ACTIVATION, ...) now and at their peak,
// and the allocator's own view (allocated vs reserved, segments, retries, OOMs). report()
// prints them as a table for people, to_json() as one JSON object for programs.
//
//   auto before = mg::memory::snapshot();
//   ... a training step ...
//   std::cout << mg::memory::report();
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "memgrad/core/device.h"
#include "memgrad/io/json.h"
#include "memgrad/core/memory_category.h"

namespace mg::memory {

struct CategoryBytes {
  int64_t current = 0;
  int64_t peak = 0;  // since the last reset_peak_stats()
};

struct Snapshot {
  Device device;
  // Page-locked host memory (pinned_host_snapshot()): the CPU's, from its own allocator.
  bool pinned = false;
  // Bytes of blocks handed to tensors (rounded to the allocator's 512-byte granularity).
  int64_t allocated_bytes = 0;
  // Bytes held from the device in segments: allocated plus cached for reuse.
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  // Bytes tensors asked for, before rounding: the sum over categories.
  int64_t requested_bytes = 0;
  int64_t peak_requested_bytes = 0;
  // Bytes of blocks in use (on CUDA also blocks freed but still awaiting other streams).
  int64_t active_bytes = 0;
  // Free bytes inside segments that still hold live blocks (fragmentation).
  int64_t inactive_split_bytes = 0;
  int64_t num_allocations = 0;    // live blocks
  int64_t num_segments = 0;
  int64_t num_alloc_retries = 0;  // times the cache was freed to satisfy a request
  int64_t num_ooms = 0;
  // Requested bytes per category (index with static_cast<int>(MemoryCategory)).
  std::array<CategoryBytes, kNumMemoryCategories> by_category{};

  const CategoryBytes& category(MemoryCategory c) const {
    return by_category[static_cast<int>(c)];
  }
};

Snapshot snapshot(Device device = Device::cpu());
// Pinned host memory (TensorOptions::pin_memory: DataLoader batches, an offloaded
// optimizer's state), which snapshot(Device::cpu()) does not count: its own allocator.
// All zeros on a build without CUDA.
Snapshot pinned_host_snapshot();
// Makes every peak (allocated, reserved, per category) equal its current value.
void reset_peak_stats(Device device = Device::cpu());
// A table: current and peak bytes per category and in total, then the allocator's
// allocated/reserved bytes, segments, retries and OOMs.
std::string report(Device device = Device::cpu());
std::string report(const Snapshot& snapshot);
// Requested bytes per category, current and peak, in three places side by side: `device`,
// pageable host memory and pinned host memory, so that what an offloaded optimizer moved
// off the device shows where it went. (With `device` the CPU, its column is the pageable one.)
std::string host_and_device_report(Device device);
// One compact JSON object with every number of the snapshot (integers, keyed by the
// snake_case field names; categories keyed by their upper-case names).
std::string to_json(const Snapshot& snapshot);
// Writes the same object as the value at the writer's current position (e.g. after a key).
void write_json(JsonWriter& json, const Snapshot& snapshot);

}  // namespace mg::memory
