// core/allocator/caching_allocator.h — PyTorch's caching allocator algorithm, in our words,
// for any device.
//
// Requests are rounded up to 512 bytes. Requests of at most 1 MiB come from the small
// pool, carved out of 2 MiB segments; larger ones from the large pool, whose segments are
// 20 MiB for requests under 10 MiB and the request rounded up to 2 MiB otherwise. A request
// takes the best-fitting free block of its pool and stream (the smallest that is large
// enough), splitting off the rest when the rest is worth keeping (>= 512 B in the small
// pool, > 1 MiB in the large pool). A freed block merges with free neighbours of its
// segment. Free segments stay cached for reuse until empty_cache(). When the backend
// refuses a new segment, every cached free segment is returned and the request retried;
// if that fails too, OutOfMemoryError explains the situation.
//
// Streams (CUDA): a block belongs to the stream it was allocated on and is reused only on
// that stream, so work ordered on one stream never sees its memory handed to another. A
// block that other streams also used (record_stream) is, when freed, held back until
// events recorded on those streams at free time have completed; until then it counts in
// active_bytes but no longer in allocated_bytes (PyTorch's semantics).
//
// Private pools (CUDA graphs): a captured graph bakes in the addresses its kernels use, so
// those blocks must not go to anyone else while the graph may replay. A private pool has
// its own small and large free blocks and its own segments; between
// begin_allocate_to_pool(pool, stream) and end_allocate_to_pool(pool) every request on
// that stream is served from the pool (best fit, splitting and merging as above, new
// segments when nothing fits), never from the default pools, and no request outside the
// routing ever takes a pool's block. Graphs that always replay in the order they were
// captured may share one pool. Statistics and categories count pool blocks like any
// other; empty_cache() and the out-of-memory retry leave a live pool's segments alone;
// release_pool() returns them as soon as they are wholly free. While any routing is
// active the allocator neither records nor queries events (either invalidates a capture).
//
// A reserve limit (set_reserved_limit; memory/memory_cap.h is the user's call, like
// PyTorch's set_per_process_memory_fraction) caps the bytes held in segments: a new
// segment that would pass it is treated as one the backend refused (cache freed, retried,
// then OutOfMemoryError naming the limit), so a test or a shared GPU can run as if the
// device were smaller.
//
// Every live block carries a MemoryCategory so memory can be reported by purpose.
// Thread-safe: one mutex guards the pools (the data loader allocates from its thread).
//
// Without caching (Caching::Off, PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING), every request
// is its own segment of exactly the requested bytes, returned to the backend when freed
// (a live private pool's when the pool is released: see begin_allocate_to_pool).
// Memory checkers (compute-sanitizer, AddressSanitizer) see only the backend's
// allocations, so only then do they catch an access past a tensor's end: with caching, the
// bytes past it belong to the same segment. Statistics and categories stay exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memgrad/core/allocator/memory_stats.h"
#include "memgrad/core/allocator/raw_backend.h"
#include "memgrad/core/device.h"
#include "memgrad/core/memory_category.h"

namespace mg {

struct Block;  // defined in block_pools.h (the allocator room's own); opaque to everyone else
class AllocatorObserver;
struct SegmentState;
// Told about a segment just before it goes back to the backend.
using SegmentReturning = std::function<void(const Block& segment)>;

// Names a pool of free blocks: kDefaultPool for the shared pools, or a private pool made by
// CachingAllocator::create_private_pool (ids are unique per allocator, never reused).
using PoolId = uint64_t;
inline constexpr PoolId kDefaultPool = 0;

struct Allocation {
  void* ptr = nullptr;     // start of the usable bytes (nullptr for zero-byte requests)
  Block* block = nullptr;  // handle to give back to free(); nullptr for zero-byte requests
};

class CachingAllocator {
 public:
  enum class Caching { On, Off };
  static constexpr size_t kRoundBytes = 512;
  static constexpr size_t kSmallRequestMax = size_t{1} << 20;    // 1 MiB
  static constexpr size_t kSmallSegmentBytes = size_t{2} << 20;  // 2 MiB
  static constexpr size_t kLargeSegmentBytes = size_t{20} << 20; // 20 MiB
  static constexpr size_t kLargeRequestDirect = size_t{10} << 20;  // >= this: own segment
  static constexpr size_t kLargeRoundBytes = size_t{2} << 20;    // 2 MiB

  CachingAllocator(Device device, std::unique_ptr<RawBackend> backend, Caching caching = Caching::On);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Hands out at least `bytes` bytes tagged `category`. Zero bytes gives an empty
  // Allocation. Throws OutOfMemoryError when the backend has no memory even after the
  // cache was freed.
  Allocation allocate(size_t bytes, MemoryCategory category, StreamId stream = 0);
  // Returns a block to its pool (nullptr is ignored); a block used on other streams waits
  // for them first (see record_stream).
  void free(Block* block);
  // Notes that work on `stream` uses the live `block`, so that free() holds it back until
  // that work is done. A use on the block's own stream needs no note: its next owner is
  // ordered after it on that stream. NOTE: host memory (a CPU-device allocator, i.e. pinned
  // memory) is the exception: its next owner is the CPU, which no stream orders, so every
  // stream is noted. Ignores nullptr (zero-byte allocations).
  void record_stream(Block* block, StreamId stream);

  // Re-tags a live block; category statistics move with it.
  void set_category(Block* block, MemoryCategory category);
  MemoryCategory category(const Block* block) const;
  // The rounded size of a live block and the size that was asked for.
  size_t block_size(const Block* block) const;
  size_t requested_size(const Block* block) const;

  // Waits for the blocks held back for other streams, then returns every free segment of
  // the default pools to the backend (a live private pool keeps its segments). Throws
  // mg::Error while a routing is active: waiting for events would invalidate a capture.
  void empty_cache();

  // ---- private pools (for CUDA graphs; see the top of this file) ----
  // A new, empty private pool.
  PoolId create_private_pool();
  // From now on, requests on `stream` are served from `pool`. A stream routes to one pool
  // at a time; several streams may route to the same pool (a capture that forks).
  // NOTE: while any routing is active, free() of a block that other streams used
  // (record_stream) records no events: the block stays held back, active but not
  // allocated, and its events are recorded once no routing is active (at the next
  // allocate() or empty_cache()). End the routing only after the capture has ended.
  // NOTE: new segments are still taken from the backend during routing, and an
  // out-of-memory retry (or release_pool of another pool) still returns segments to it:
  // a CUDA backend must make its allocate and deallocate legal during a capture.
  // Caching::Off: routing works the same, each request its own segment, but a freed pool
  // block stays reserved by its pool (neither reused nor returned) until release_pool,
  // because the graph may still replay into it.
  void begin_allocate_to_pool(PoolId pool, StreamId stream);
  // Stops routing every stream that routes to `pool`; the pool's blocks stay where they are.
  void end_allocate_to_pool(PoolId pool);
  // The pool's owner is gone (graphs sharing a pool release it once, when the last one
  // goes): its free segments go back to the backend now (reported as SegmentFree events),
  // the others as soon as their blocks are all freed. The id is invalid afterwards.
  void release_pool(PoolId pool);
  // Bytes of the segments `pool` holds (kDefaultPool: the default pools').
  size_t pool_reserved_bytes(PoolId pool) const;

  // Caps the bytes this allocator holds in segments (reserved); kNoReservedLimit lifts the
  // cap. A cap below what is reserved now takes effect as segments are freed.
  static constexpr size_t kNoReservedLimit = SIZE_MAX;
  void set_reserved_limit(size_t bytes);
  size_t reserved_limit() const;

  MemoryStats stats() const;
  void reset_peak_stats();
  // Zeroes the cumulative totals (allocated/freed of every Stat) and the counters
  // (retries, OOMs, backend calls); current values and peaks stay, as in PyTorch's
  // reset_accumulated_memory_stats().
  void reset_accumulated_stats();
  // A readable table of the statistics and of bytes by category.
  std::string memory_summary() const;

  Device device() const { return device_; }
  Caching caching() const { return caching_; }
  RawBackend& backend() { return *backend_; }
  const RawBackend& backend() const { return *backend_; }

  // The size a request is rounded to, and the segment size it would need when no cached
  // block fits (exposed for tests and the memory predictor).
  static size_t round_size(size_t bytes);
  static size_t segment_size_for(size_t rounded_bytes);

 private:
  struct Pools;  // the default and the private pools; defined in block_pools.h

  // Records the events of the blocks freed during a routing, then finishes the free of
  // every held-back block whose events are done (all of them, after waiting, when `wait`).
  // Called with mutex_ held and no routing active.
  void process_pending_frees(bool wait, AllocatorObserver* observer);
  // The observer to report an operation's events to (nullptr: nobody listens), told first,
  // once per installation, which segments this allocator holds. Called with mutex_ held at
  // the start of each operation that changes the pools, before anything changes: its
  // events go to the observer it returns, even if another is installed meanwhile (that
  // one hears of this operation's outcome in its catch-up at the next operation).
  AllocatorObserver* observer_for_operation();
  // Reports a segment's return to `observer` (given to Pools, which returns segments).
  SegmentReturning segment_returning(AllocatorObserver* observer);
  // Every segment with its live blocks, in address order. Called with mutex_ held.
  std::vector<SegmentState> segment_states() const;
  // The second half of free(): the block goes back to its pool. Called with mutex_ held.
  void release_block(Block* block, AllocatorObserver* observer);
  // A new segment from the backend, or nullptr when it has none or the reserve limit
  // would be passed. Called with mutex_ held.
  void* take_segment(size_t bytes);

  Device device_;
  std::unique_ptr<RawBackend> backend_;
  Caching caching_;
  std::unique_ptr<Pools> pools_;
  mutable std::mutex mutex_;
  MemoryStats stats_;
  size_t reserved_limit_ = kNoReservedLimit;
  uint64_t reported_installation_ = 0;  // the observer installation told our segments
};

// Formats a byte count for people: "512 B", "1.50 KiB", "20.00 MiB", "1.25 GiB".
std::string format_bytes(int64_t bytes);

}  // namespace mg
