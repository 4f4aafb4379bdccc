// core/allocator/allocator_observer.h — how the caching allocators tell whoever listens
// what they did with memory, without knowing who listens.
//
// The memory room (memory/recorder.h) listens while a Recorder runs, to draw the timeline
// and answer "who holds my memory". The allocator sits below it and must not depend on
// it, so it reports through this interface: each allocator event (a block handed out,
// freed, re-tagged to another category, the cache released to the device), and, from the
// tensor factory, the shape and dtype a new block was made for.
//
// NOTE: when nobody listens, reporting costs one atomic load per event (the
// observer pointer is null); nothing is formatted, locked or allocated.
#pragma once

#include <cstdint>

#include "memgrad/core/allocator/memory_stats.h"
#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/memory_category.h"
#include "memgrad/core/shape.h"

namespace mg {

enum class AllocatorEventKind : uint8_t { Allocate, Free, Retag, ReleaseCache };

struct AllocatorEvent {
  Device device;
  AllocatorEventKind kind = AllocatorEventKind::Allocate;
  const void* address = nullptr;  // the block's; nullptr for ReleaseCache
  // Requested bytes (before rounding): positive for Allocate and Retag, negative for Free;
  // for ReleaseCache minus the reserved bytes returned to the device.
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::Temporary;
  MemoryCategory previous_category = MemoryCategory::Temporary;  // Retag: the block's old one
};

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // Called with the reporting allocator's lock held, after `stats` took in the event: keep
  // it short, and never allocate through the same allocator from here.
  virtual void on_allocator_event(const AllocatorEvent& event, const MemoryStats& stats) = 0;
  // The tensor factory filled the block at `address` with a tensor of `sizes` and `dtype`.
  virtual void on_tensor_allocated(const void* address, const Shape& sizes, DType dtype) = 0;
};

// The observer in force, or nullptr when nobody listens.
AllocatorObserver* allocator_observer();

// Makes `observer` the one every allocator reports to (nullptr: nobody). An observer must
// outlive its installation, and any event already being reported when it is replaced.
// Throws mg::Error when another observer is installed (one listener at a time).
void set_allocator_observer(AllocatorObserver* observer);

}  // namespace mg
