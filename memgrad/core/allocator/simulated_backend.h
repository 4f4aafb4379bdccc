// core/allocator/simulated_backend.h — a device that hands out addresses without memory.
//
// The caching allocator runs its exact rounding, splitting and caching logic on top, so
// the algorithm can be tested without a GPU and a run's peak memory predicted before it
// happens. The addresses are never dereferenced (has_storage() is false).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "memgrad/core/allocator/raw_backend.h"

namespace mg {

// Where a backend puts each new segment relative to the ones before. It matters: the
// caching allocator breaks ties between equally good free blocks by address, which decides
// how blocks split, and so the bytes allocated and reserved. A simulated device standing
// in for a real one (memory/simulated_target.h) places segments as that device does.
enum class SegmentPlacement : uint8_t {
  Ascending,   // above the previous ones, as cudaMalloc does
  Descending,  // below them, as the host's malloc does: it takes blocks of a segment's size
               // from mmap, which puts each new mapping just below the last
};

class SimulatedBackend final : public RawBackend {
 public:
  // Fake addresses lie between these: far from anything real, and aligned to every
  // segment size at the start of either end.
  static constexpr uintptr_t kFirstAddress = uintptr_t{1} << 40;
  static constexpr uintptr_t kLastAddress = uintptr_t{1} << 62;
  static constexpr size_t kAlignment = 512;

  explicit SimulatedBackend(size_t capacity_bytes, SegmentPlacement placement = SegmentPlacement::Ascending);

  // Distinct, non-null, 512-aligned addresses; nullptr when used + bytes > capacity.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  size_t capacity() const override { return capacity_bytes_; }
  std::string describe_memory() const override;
  bool has_storage() const override { return false; }

  size_t used_bytes() const { return used_bytes_; }

 private:
  size_t capacity_bytes_;
  SegmentPlacement placement_;
  size_t used_bytes_ = 0;
  // NOTE: bump pointers, up from kFirstAddress or down from kLastAddress; freed ranges are
  // never reused. The address space (2^62 - 2^40 bytes) outlasts any run, and never
  // reusing an address makes a stale pointer in a test stand out instead of aliasing a
  // newer block. (mmap would reuse an unmapped hole; the caching allocator only frees
  // segments on empty_cache() and out-of-memory retries.)
  uintptr_t lowest_free_ = kFirstAddress;  // Ascending: the next segment starts here
  uintptr_t highest_free_ = kLastAddress;  // Descending: the next segment ends here
};

}  // namespace mg
