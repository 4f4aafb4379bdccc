// core/storage.h — Storage: one block of bytes from a device's caching allocator, shared
// (reference-counted) by every tensor that views it.
//
// The storage is where memory facts live: its category (PARAMETER, ACTIVATION, ...), and a
// version counter bumped by every in-place write, which autograd compares to catch
// in-place changes to tensors saved for backward.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/device.h"
#include "memgrad/core/memory_category.h"

namespace mg {

class Storage {
 public:
  // Bytes from `device`'s allocator, on the calling thread's current stream of that device.
  Storage(size_t nbytes, Device device, MemoryCategory category);
  // Bytes from a given allocator (pinned host memory comes from its own), on `stream`.
  Storage(size_t nbytes, CachingAllocator& allocator, MemoryCategory category,
          StreamId stream = 0);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return allocation_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // False on the simulated device, whose blocks are addresses without memory.
  bool has_data() const { return has_data_; }
  // True for page-locked host memory, which CUDA copies from and to asynchronously.
  bool is_pinned() const { return pinned_; }

  MemoryCategory category() const { return category_; }
  void set_category(MemoryCategory category);

  // Tells the allocator that work on `stream` uses these bytes, so that when the storage
  // dies they are not handed out again before that work is done.
  void record_stream(StreamId stream);

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Autograd saving this storage for backward: while at least one SavedTensor holds it,
  // an intermediate result (TEMPORARY) counts as ACTIVATION. Parameters, inputs and other
  // categories keep theirs: their bytes would be alive without the graph anyway.
  void add_activation_reference();
  void remove_activation_reference();

 private:
  CachingAllocator* allocator_;
  Allocation allocation_;
  size_t nbytes_;
  Device device_;
  bool has_data_;
  bool pinned_;
  MemoryCategory category_;
  std::atomic<uint64_t> version_{0};
  int activation_references_ = 0;
  bool tagged_as_activation_ = false;
};

}  // namespace mg
