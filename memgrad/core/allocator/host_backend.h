// core/allocator/host_backend.h — the CPU's raw backend: 64-byte aligned host memory (one
// cache line, and what AVX-512 loads like), optionally capped so that tests can exercise
// the out-of-memory path on real memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "memgrad/core/allocator/raw_backend.h"

namespace mg {

class HostBackend final : public RawBackend {
 public:
  static constexpr size_t kAlignment = 64;

  // capacity_bytes == 0: unbounded (only the operating system says no).
  explicit HostBackend(size_t capacity_bytes = 0) : capacity_bytes_(capacity_bytes) {}

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  size_t capacity() const override { return capacity_bytes_; }
  std::string describe_memory() const override;

  size_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }

 private:
  size_t capacity_bytes_;
  // Atomic because describe_memory() may be read from another thread than the allocating one.
  std::atomic<size_t> used_bytes_{0};
};

}  // namespace mg
