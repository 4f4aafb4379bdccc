// core/allocator/allocator_observer.h — how the caching allocators tell whoever listens
// what they did with memory, without knowing who listens.
//
// The memory room (memory/recorder.h) listens while a Recorder runs, to draw the timeline
// and answer "who holds my memory". The allocator sits below it and must not depend on
// it, so it reports through this interface: each allocator event (a block handed out,
// freed, re-tagged to another category, a segment taken from or returned to the backend),
// the segments an allocator already holds when a new observer starts listening, and, from
// the tensor factory, the shape and dtype a new block was made for.
//
// NOTE: when nobody listens, reporting costs one atomic load per event (the
// observer pointer is null); nothing is formatted, locked or allocated.
#pragma once

#include <cstdint>
#include <vector>

#include "memgrad/core/allocator/memory_stats.h"
#include "memgrad/core/allocator/raw_backend.h"
#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/memory_category.h"
#include "memgrad/core/shape.h"

namespace mg {

// Blocks: Allocate, Free, Retag. Segments (what the backend handed out, which blocks are
// carved from): SegmentAllocate, SegmentFree (empty_cache(), the out-of-memory retry, a
// released private pool, or a free without caching).
enum class AllocatorEventKind : uint8_t { Allocate, Free, Retag, SegmentAllocate, SegmentFree };

// Whether events of `kind` concern a segment rather than a block (they move no category's bytes).
constexpr bool is_segment_event(AllocatorEventKind kind) {
  return kind == AllocatorEventKind::SegmentAllocate || kind == AllocatorEventKind::SegmentFree;
}

struct AllocatorEvent {
  Device device;
  AllocatorEventKind kind = AllocatorEventKind::Allocate;
  const void* address = nullptr;  // the block's, or the segment's
  // Blocks: requested bytes (before rounding), positive for Allocate and Retag, negative for
  // Free. Segments: the segment's bytes, positive for SegmentAllocate, negative for SegmentFree.
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::Temporary;
  MemoryCategory previous_category = MemoryCategory::Temporary;  // Retag: the block's old one
  int64_t block_bytes = 0;  // the bytes the block spans (rounded); a segment's bytes
  StreamId stream = 0;      // the stream of the block's segment
  bool small_pool = false;  // the segment is carved for requests of at most 1 MiB
};

// A block handed out and not yet freed, inside its segment.
struct LiveBlockState {
  uintptr_t address = 0;
  int64_t block_bytes = 0;      // rounded
  int64_t requested_bytes = 0;  // asked for
  MemoryCategory category = MemoryCategory::Temporary;
};

// A segment an allocator holds, with its live blocks in address order; its other bytes
// are free (or held back for other streams' events: see caching_allocator.h).
struct SegmentState {
  uintptr_t address = 0;
  int64_t bytes = 0;
  StreamId stream = 0;
  bool small_pool = false;  // carved for requests of at most 1 MiB
  std::vector<LiveBlockState> live_blocks;
};

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // Called with the reporting allocator's lock held, after `stats` took in the event: keep
  // it short, and never allocate through the same allocator from here.
  virtual void on_allocator_event(const AllocatorEvent& event, const MemoryStats& stats) = 0;
  // What an allocator of `device` held before the observer was installed: its segments in
  // address order. Called once per allocator and installation, with its lock held, just
  // before the first event it reports (so no event falls between the two).
  virtual void on_existing_segments(Device device, const std::vector<SegmentState>& segments) = 0;
  // The tensor factory filled the block at `address` with a tensor of `sizes` and `dtype`.
  virtual void on_tensor_allocated(const void* address, const Shape& sizes, DType dtype) = 0;
};

// The observer in force, or nullptr when nobody listens.
AllocatorObserver* allocator_observer();

// Makes `observer` the one every allocator reports to (nullptr: nobody). An observer must
// outlive its installation, and any event already being reported when it is replaced.
// Throws mg::Error when another observer is installed (one listener at a time).
void set_allocator_observer(AllocatorObserver* observer);

// Counts installations: an allocator whose last reported installation differs from this
// one owes the observer its existing segments (on_existing_segments) first.
uint64_t allocator_observer_installation();

}  // namespace mg
