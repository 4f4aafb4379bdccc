// core/allocator/simulated_backend.h — a device that hands out addresses without memory.
//
// The caching allocator runs its exact rounding, splitting and caching logic on top, so
// the algorithm can be tested without a GPU and a run's peak memory predicted before it
// happens. The addresses are never dereferenced (has_storage() is false).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator/raw_backend.h"

namespace mg {

class SimulatedBackend final : public RawBackend {
 public:
  // Fake addresses start here: far from anything real, and aligned to every segment size.
  static constexpr uintptr_t kFirstAddress = uintptr_t{1} << 40;
  static constexpr size_t kAlignment = 512;

  explicit SimulatedBackend(size_t capacity_bytes);

  // Distinct, non-null, 512-aligned addresses; nullptr when used + bytes > capacity.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  size_t capacity() const override { return capacity_bytes_; }
  std::string describe_memory() const override;
  bool has_storage() const override { return false; }

  size_t used_bytes() const { return used_bytes_; }

 private:
  size_t capacity_bytes_;
  size_t used_bytes_ = 0;
  // NOTE: a bump pointer; freed ranges are never reused. The address space (2^64 - 2^40
  // bytes) outlasts any run, and never reusing an address makes a stale pointer in a test
  // stand out instead of aliasing a newer block.
  uintptr_t next_address_ = kFirstAddress;
};

}  // namespace mg
