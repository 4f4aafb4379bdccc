// core/allocator/memory_stats.h — the caching allocator's statistics, modelled on PyTorch's
// torch.cuda.memory_stats(): each statistic has a current value, a peak since the last
// reset_peak_stats(), and cumulative totals.
#pragma once

#include <array>
#include <cstdint>

#include "memgrad/core/memory_category.h"

namespace mg {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // cumulative amount added
  int64_t freed = 0;      // cumulative amount removed

  void increase(int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
};

struct MemoryStats {
  // Bytes (rounded block sizes) handed to tensors.
  Stat allocated_bytes;
  // Bytes held from the backend in segments, used or cached.
  Stat reserved_bytes;
  // Bytes of blocks in use (on the CPU and simulated device equal to allocated_bytes; on
  // CUDA also blocks freed but still awaiting other streams).
  Stat active_bytes;
  // Bytes of free blocks inside segments that are partly in use (fragmentation).
  Stat inactive_split_bytes;
  // Bytes tensors asked for, before rounding.
  Stat requested_bytes;

  Stat allocation_count;      // live blocks handed out
  Stat segment_count;         // segments held from the backend
  Stat active_count;
  Stat inactive_split_count;

  int64_t num_alloc_retries = 0;  // backend failures that freed the cache and tried again
  int64_t num_ooms = 0;           // failures that ended in OutOfMemoryError
  int64_t num_backend_allocs = 0;
  int64_t num_backend_frees = 0;

  // Requested bytes by memory category (index with static_cast<int>(MemoryCategory)).
  // Requested, not rounded, so that e.g. PARAMETER equals the parameters' exact bytes.
  std::array<Stat, kNumMemoryCategories> category_bytes{};

  const Stat& category(MemoryCategory c) const { return category_bytes[static_cast<int>(c)]; }
};

}  // namespace mg
