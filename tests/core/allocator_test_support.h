// tests/core/allocator_test_support.h — what the caching-allocator tests share: a
// simulated allocator of a given capacity, addresses and byte counts as numbers, and the
// message of an expected out-of-memory error.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "memgrad/core/error.h"

namespace allocator_test {

using mg::Allocation;
using mg::CachingAllocator;
using mg::Device;
using mg::MemoryCategory;

inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;
inline constexpr size_t GiB = size_t{1} << 30;

// CachingAllocator is neither copyable nor movable; returning the prvalue relies on
// guaranteed copy elision.
inline CachingAllocator make_simulated(size_t capacity) {
  return CachingAllocator(Device::simulated(), std::make_unique<mg::SimulatedBackend>(capacity));
}

inline uintptr_t address(const Allocation& allocation) { return reinterpret_cast<uintptr_t>(allocation.ptr); }

inline int64_t bytes(size_t value) { return static_cast<int64_t>(value); }

// The message of the OutOfMemoryError `allocate` throws (fails the test if none is thrown).
inline std::string oom_message(CachingAllocator& allocator, size_t request, MemoryCategory category) {
  try {
    allocator.allocate(request, category);
  } catch (const mg::OutOfMemoryError& error) {
    return error.what();
  }
  FAIL("expected mg::OutOfMemoryError for a request of " << request << " bytes");
  return {};
}

}  // namespace allocator_test
