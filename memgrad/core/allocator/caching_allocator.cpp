// core/allocator/caching_allocator.cpp — the block pool behind every device's memory:
// allocate, free, merge and return segments (the bookkeeping they work on, and how blocks
// and segments are laid out: core/allocator/block_pools.h).
//
// A block that other streams used (record_stream) is, when freed, marked with one backend
// event per such stream and parked in a pending list, still `allocated` so that no
// neighbour merges with it; allocate() (cheaply: one emptiness check when nothing waits)
// and empty_cache() (waiting) finish the free of those whose events are done. While a
// routing to a private pool is active (a capture may be underway) no event is recorded
// or queried: such a block waits, unmarked, in a second list until the routing ends.
//
// A released private pool lives on, unreachable by id, until its last segment is wholly
// free and returned; it never holds a wholly free segment.
//
// Statistics follow PyTorch's definitions. The subtle one is inactive_split: a free block
// counts when its segment is split (it has a neighbour), i.e. free bytes that only the
// blocks of the same segment can reuse. Every change to a pool goes through
// insert_free/erase_free, which tally the change, and the net change is applied once
// per operation (as PyTorch does), so "total allocated/freed" of this statistic measure
// net flows, not bookkeeping steps.
#include "memgrad/core/allocator/caching_allocator.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "memgrad/core/allocator/allocator_observer.h"
#include "memgrad/core/allocator/block_pools.h"
#include "memgrad/core/allocator/memory_report.h"
#include "memgrad/core/error.h"

namespace mg {

namespace {

void apply_change(Stat& stat, int64_t change) {
  if (change > 0) stat.increase(change);
  if (change < 0) stat.decrease(-change);
}

// Largest request we accept: rounding it up to 2 MiB must not overflow size_t.
constexpr size_t kMaxRequestBytes = std::numeric_limits<size_t>::max() / 2;

}  // namespace

// ---- The allocator's decisions, one function each (PyTorch's names in parentheses) ----

size_t CachingAllocator::round_size(size_t bytes) {
  // NOTE: zero bytes rounds to zero, matching allocate(0), which takes no block.
  return (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

size_t CachingAllocator::segment_size_for(size_t rounded_bytes) {
  if (rounded_bytes <= kSmallRequestMax) return kSmallSegmentBytes;
  if (rounded_bytes < kLargeRequestDirect) return kLargeSegmentBytes;
  return (rounded_bytes + kLargeRoundBytes - 1) / kLargeRoundBytes * kLargeRoundBytes;
}

namespace {

using Caching = CachingAllocator::Caching;

// The bytes a request occupies (round_size): rounded up to 512 with caching, so that freed
// blocks fit later requests of similar size. Without caching, exactly the request: each is
// its own segment, and a memory checker then sees where the tensor ends.
size_t rounded_request(size_t bytes, Caching caching) {
  return caching == Caching::On ? CachingAllocator::round_size(bytes) : bytes;
}

// Whether a request of `rounded_bytes` is served by the small pool (the size half of
// get_pool; the stream's routing picks the BlockPool): up to 1 MiB. Small requests are
// packed into 2 MiB segments of their own, so a short-lived small tensor never splits a
// large segment that a big tensor could have reused.
bool is_small_request(size_t rounded_bytes) { return rounded_bytes <= CachingAllocator::kSmallRequestMax; }

// Which cached block serves a request (get_free_block): the smallest free block of `pool`
// (its small or large set, by the request's size) on `stream` that holds `rounded_bytes`,
// the lowest address among equal sizes; nullptr when none does. The free set's order
// (stream, size, address) makes this one lookup. NOTE: any block that fits serves, however
// much larger: there is no limit on oversize blocks (PyTorch's max_split_size_mb, unset by
// default), and should_split decides what happens to the rest.
Block* best_fit(BlockPool& pool, StreamId stream, size_t rounded_bytes) {
  const FreeBlockSet& free_set = pool.free_blocks(is_small_request(rounded_bytes));
  auto fit = free_set.lower_bound(FreeBlockKey{stream, rounded_bytes, 0});
  if (fit == free_set.end() || (*fit)->stream != stream) return nullptr;
  return *fit;
}

// Whether the rest of `block` beyond a request of `rounded_bytes` is split off as a free
// block of its own (should_split), or stays with the request as unused bytes: any rest in
// the small pool (sizes are multiples of 512), more than a small request's worth in the
// large pool (a smaller rest there would only ever serve small requests, which never look
// in the large pool).
bool should_split(const Block& block, size_t rounded_bytes) {
  const size_t rest = block.size - rounded_bytes;
  return block.in_small_pool ? rest >= CachingAllocator::kRoundBytes : rest > CachingAllocator::kSmallRequestMax;
}

// The segment to take from the backend when no cached block serves a request
// (get_allocation_size): segment_size_for with caching; without, exactly the request, so
// nothing is ever split off.
size_t new_segment_bytes(size_t rounded_bytes, Caching caching) {
  return caching == Caching::On ? CachingAllocator::segment_size_for(rounded_bytes) : rounded_bytes;
}

}  // namespace

CachingAllocator::CachingAllocator(Device device, std::unique_ptr<RawBackend> backend, Caching caching)
    : device_(device), backend_(std::move(backend)), caching_(caching), pools_(std::make_unique<Pools>()) {
  MG_CHECK(backend_ != nullptr, "CachingAllocator for ", device_,
           " needs a raw backend, got nullptr");
}

CachingAllocator::~CachingAllocator() {
  // Live blocks at this point are the owner's leak; the segments go back regardless.
  for (const Pools::PendingEvent& entry : pools_->pending) backend_->destroy_event(entry.event);
  const std::vector<Block*> segment_heads = pools_->segment_heads();
  for (Block* head : segment_heads) {
    size_t segment_bytes = 0;
    for (Block* block = head; block != nullptr;) {
      segment_bytes += block->size;
      Block* next = block->next;
      if (block != head) delete block;
      block = next;
    }
    backend_->deallocate(head->ptr(), segment_bytes);
    delete head;
  }
}

Allocation CachingAllocator::allocate(size_t bytes, MemoryCategory category, StreamId stream) {
  if (bytes == 0) return {};
  MG_CHECK(bytes <= kMaxRequestBytes, "cannot allocate ", bytes, " bytes on ", device_,
           ": the size is impossibly large. Hint: a negative size converted to an unsigned "
           "integer looks like this; check the shape that produced it.");
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorObserver* const observer = observer_for_operation();
  // NOTE: during a routing a capture may be underway, and querying or waiting for an event
  // would invalidate it: held-back blocks stay held back until the routing ends.
  const bool routing = !pools_->routes.empty();
  if (!routing) process_pending_frees(/*wait=*/false, observer);
  const size_t rounded = rounded_request(bytes, caching_);
  BlockPool& pool = pools_->pool_for(stream);
  InactiveSplitChange split_change;

  // Without caching nothing is ever reused: every request takes a new segment.
  Block* block = caching_ == Caching::On ? best_fit(pool, stream, rounded) : nullptr;
  if (block != nullptr) pools_->erase_free(block, split_change);

  if (block == nullptr) {
    const size_t segment_bytes = new_segment_bytes(rounded, caching_);
    auto segment = std::make_unique<Block>();  // made first so a bad_alloc leaks no segment
    void* base = take_segment(segment_bytes);
    if (base == nullptr) {
      // The backend is out of memory: wait for the blocks other streams still use (not
      // during a routing), give back every cached free segment of the default pools (a live
      // private pool's hold a graph's addresses) and try once more.
      if (!routing) process_pending_frees(/*wait=*/true, observer);
      Pools::release_free_segments(pools_->shared, *backend_, stats_, segment_returning(observer));
      stats_.num_alloc_retries += 1;
      base = take_segment(segment_bytes);
    }
    if (base == nullptr) {
      stats_.num_ooms += 1;
      throw OutOfMemoryError(out_of_memory_message(device_, *backend_, stats_, bytes, rounded,
                                                   segment_bytes, reserved_limit_));
    }
    stats_.num_backend_allocs += 1;
    stats_.reserved_bytes.increase(static_cast<int64_t>(segment_bytes));
    stats_.segment_count.increase(1);
    segment->address = reinterpret_cast<uintptr_t>(base);
    segment->size = segment_bytes;
    segment->stream = stream;
    segment->pool = &pool;
    segment->in_small_pool = is_small_request(rounded);
    pool.reserved_bytes += static_cast<int64_t>(segment_bytes);
    pool.segment_count += 1;
    if (observer != nullptr) {
      const auto bytes = static_cast<int64_t>(segment_bytes);
      observer->on_allocator_event({device_, AllocatorEventKind::SegmentAllocate, base, bytes,
                                    MemoryCategory::Temporary, MemoryCategory::Temporary, bytes, stream,
                                    is_small_request(rounded)},
                                   stats_);
    }
    block = segment.release();
  }

  if (should_split(*block, rounded)) {
    auto remainder = std::make_unique<Block>();
    remainder->address = block->address + rounded;
    remainder->size = block->size - rounded;
    remainder->stream = block->stream;
    remainder->pool = block->pool;
    remainder->in_small_pool = block->in_small_pool;
    remainder->prev = block;
    remainder->next = block->next;
    if (block->next != nullptr) block->next->prev = remainder.get();
    block->next = remainder.get();
    block->size = rounded;
    pools_->insert_free(remainder.release(), split_change);
  }

  block->allocated = true;
  block->requested = bytes;
  block->category = category;
  pools_->live.insert(block);

  const auto block_bytes = static_cast<int64_t>(block->size);
  const auto requested_bytes = static_cast<int64_t>(bytes);
  stats_.allocated_bytes.increase(block_bytes);
  stats_.active_bytes.increase(block_bytes);
  stats_.requested_bytes.increase(requested_bytes);
  stats_.allocation_count.increase(1);
  stats_.active_count.increase(1);
  stats_.category_bytes[static_cast<int>(category)].increase(requested_bytes);
  apply_change(stats_.inactive_split_bytes, split_change.bytes);
  apply_change(stats_.inactive_split_count, split_change.count);
  if (observer != nullptr) {
    observer->on_allocator_event({device_, AllocatorEventKind::Allocate, block->ptr(), requested_bytes, category,
                                  category, block_bytes, block->stream},
                                 stats_);
  }
  return Allocation{block->ptr(), block};
}

void* CachingAllocator::take_segment(size_t bytes) {
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes.current);
  if (reserved_limit_ != kNoReservedLimit && (bytes > reserved_limit_ || reserved > reserved_limit_ - bytes)) {
    return nullptr;
  }
  return backend_->allocate(bytes);
}

void CachingAllocator::set_reserved_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  reserved_limit_ = bytes;
}

size_t CachingAllocator::reserved_limit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_limit_;
}

void CachingAllocator::free(Block* block) {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorObserver* const observer = observer_for_operation();
  auto live = pools_->live.find(block);
  MG_CHECK(live != pools_->live.end(), "free() on ", device_,
           " got a block this allocator did not hand out or has already freed. Hint: "
           "each Allocation must be freed exactly once, by the allocator that made it.");

  // Mark what the other streams have enqueued so far; the block waits for those marks
  // (during a routing, unmarked until it ends). Done before anything changes, so a failing
  // backend leaves the block live.
  bool held_back = false;
  if (!block->stream_uses.empty()) {
    if (pools_->routes.empty()) {
      pools_->record_stream_events(block, *backend_);
      held_back = block->pending_events > 0;
    } else {
      pools_->freed_during_routing.push_back(block);
      held_back = true;
    }
  }
  pools_->live.erase(live);

  // The tensor is gone: it no longer counts as allocated, requested or in its category.
  // NOTE: PyTorch keeps requested_bytes until the events complete; we drop it here, with
  // allocated, so that requested <= allocated holds and the categories sum to requested.
  // A block awaiting events still counts as active (release_block drops that).
  const auto requested_bytes = static_cast<int64_t>(block->requested);
  stats_.allocated_bytes.decrease(static_cast<int64_t>(block->size));
  stats_.requested_bytes.decrease(requested_bytes);
  stats_.allocation_count.decrease(1);
  stats_.category_bytes[static_cast<int>(block->category)].decrease(requested_bytes);
  if (observer != nullptr) {
    observer->on_allocator_event({device_, AllocatorEventKind::Free, block->ptr(), -requested_bytes, block->category,
                                  block->category, static_cast<int64_t>(block->size), block->stream},
                                 stats_);
  }
  block->requested = 0;
  block->category = MemoryCategory::Temporary;

  if (!held_back) release_block(block, observer);
}

void CachingAllocator::release_block(Block* block, AllocatorObserver* observer) {
  stats_.active_bytes.decrease(static_cast<int64_t>(block->size));
  stats_.active_count.decrease(1);
  block->allocated = false;

  // Merge with free neighbours; the freed block absorbs them and survives.
  InactiveSplitChange split_change;
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    pools_->erase_free(prev, split_change);
    block->address = prev->address;
    block->size += prev->size;
    block->prev = prev->prev;
    if (block->prev != nullptr) block->prev->next = block;
    delete prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    pools_->erase_free(next, split_change);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  // A wholly free segment that nobody may cache goes straight back: one of a released pool,
  // or, without caching, of the default pools (a live private pool keeps it even then:
  // its graph may replay into it).
  BlockPool& pool = *block->pool;
  const bool uncached = pool.released || (caching_ == Caching::Off && pool.id == kDefaultPool);
  if (uncached && !block->is_split()) {
    Pools::return_segment(block, *backend_, stats_, segment_returning(observer));
    pools_->drop_if_finished(pool);
  } else {
    pools_->insert_free(block, split_change);
  }
  apply_change(stats_.inactive_split_bytes, split_change.bytes);
  apply_change(stats_.inactive_split_count, split_change.count);
}

void CachingAllocator::process_pending_frees(bool wait, AllocatorObserver* observer) {
  // No capture is underway now: mark the blocks freed during a routing.
  std::vector<Block*>& unmarked = pools_->freed_during_routing;
  while (!unmarked.empty()) {
    Block* block = unmarked.back();
    pools_->record_stream_events(block, *backend_);  // on failure the block stays listed
    unmarked.pop_back();
    if (block->pending_events == 0) release_block(block, observer);
  }
  std::vector<Pools::PendingEvent>& pending = pools_->pending;
  // NOTE: each entry leaves the list before its event is destroyed, so a backend error
  // (thrown by event_done or synchronize_event) leaves the list consistent. The list is
  // short (blocks freed while other streams were busy), so erasing from a vector is cheap.
  for (auto it = pending.begin(); it != pending.end();) {
    if (wait) {
      backend_->synchronize_event(it->event);
    } else if (!backend_->event_done(it->event)) {
      ++it;
      continue;
    }
    const Pools::PendingEvent entry = *it;
    it = pending.erase(it);
    backend_->destroy_event(entry.event);
    if (--entry.block->pending_events == 0) release_block(entry.block, observer);
  }
}

void CachingAllocator::record_stream(Block* block, StreamId stream) {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  MG_CHECK(pools_->live.count(block) == 1, "record_stream on ", device_,
           " got a block that is not live. Hint: record the stream while the tensor that "
           "owns the memory is still alive.");
  if (stream == block->stream && !device_.is_cpu()) return;
  for (StreamId use : block->stream_uses) {
    if (use == stream) return;
  }
  block->stream_uses.push_back(stream);
}

void CachingAllocator::set_category(Block* block, MemoryCategory category) {
  MG_CHECK(block != nullptr, "set_category on ", device_, " got an empty block. Hint: "
           "zero-byte allocations have no block and no category.");
  std::lock_guard<std::mutex> lock(mutex_);
  MG_ASSERT(block->allocated, "set_category on a block that is not live");
  AllocatorObserver* const observer = observer_for_operation();
  const auto requested_bytes = static_cast<int64_t>(block->requested);
  stats_.category_bytes[static_cast<int>(block->category)].decrease(requested_bytes);
  stats_.category_bytes[static_cast<int>(category)].increase(requested_bytes);
  if (observer != nullptr && category != block->category) {
    observer->on_allocator_event({device_, AllocatorEventKind::Retag, block->ptr(), requested_bytes, category,
                                  block->category, static_cast<int64_t>(block->size), block->stream},
                                 stats_);
  }
  block->category = category;
}

MemoryCategory CachingAllocator::category(const Block* block) const {
  MG_CHECK(block != nullptr, "category() of an empty block on ", device_);
  std::lock_guard<std::mutex> lock(mutex_);
  return block->category;
}

size_t CachingAllocator::block_size(const Block* block) const {
  if (block == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  return block->size;
}

size_t CachingAllocator::requested_size(const Block* block) const {
  if (block == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  return block->requested;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  MG_CHECK(pools_->routes.empty(), "empty_cache() on ", device_, " while stream ", pools_->routes.front().stream,
           " allocates to private pool ", pools_->routes.front().pool->id, ": it would wait for device events, "
           "which invalidates a CUDA graph capture that may be underway. Hint: empty the cache before "
           "begin_allocate_to_pool() or after end_allocate_to_pool().");
  AllocatorObserver* const observer = observer_for_operation();
  process_pending_frees(/*wait=*/true, observer);
  // Released pools hold no wholly free segment (release_block returns them at once).
  Pools::release_free_segments(pools_->shared, *backend_, stats_, segment_returning(observer));
}

AllocatorObserver* CachingAllocator::observer_for_operation() {
  AllocatorObserver* observer = allocator_observer();
  if (observer == nullptr) return nullptr;
  const uint64_t installation = allocator_observer_installation();
  if (installation != reported_installation_) {
    reported_installation_ = installation;
    observer->on_existing_segments(device_, segment_states());
  }
  return observer;
}

SegmentReturning CachingAllocator::segment_returning(AllocatorObserver* observer) {
  return [this, observer](const Block& segment) {
    if (observer != nullptr) {
      const auto bytes = static_cast<int64_t>(segment.size);
      observer->on_allocator_event({device_, AllocatorEventKind::SegmentFree, segment.ptr(), -bytes,
                                    MemoryCategory::Temporary, MemoryCategory::Temporary, bytes, segment.stream,
                                    segment.in_small_pool},
                                   stats_);
    }
  };
}

std::vector<SegmentState> CachingAllocator::segment_states() const {
  std::vector<SegmentState> segments;
  for (const Block* head : pools_->segment_heads()) {
    SegmentState& segment = segments.emplace_back();
    segment.address = head->address;
    segment.stream = head->stream;
    segment.small_pool = head->in_small_pool;
    for (const Block* block = head; block != nullptr; block = block->next) {
      segment.bytes += static_cast<int64_t>(block->size);
      if (pools_->live.count(const_cast<Block*>(block)) == 0) continue;  // free or held back
      segment.live_blocks.push_back({block->address, static_cast<int64_t>(block->size),
                                     static_cast<int64_t>(block->requested), block->category});
    }
  }
  std::sort(segments.begin(), segments.end(), [](const SegmentState& a, const SegmentState& b) {
    return a.address < b.address;
  });
  return segments;
}

PoolId CachingAllocator::create_private_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  const PoolId id = pools_->next_private_id;
  pools_->private_pools.emplace(id, std::make_unique<BlockPool>(id));
  pools_->next_private_id += 1;
  return id;
}

void CachingAllocator::begin_allocate_to_pool(PoolId pool, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  BlockPool& target = pools_->private_pool(pool, "begin_allocate_to_pool", device_);
  for (const Pools::Route& route : pools_->routes) {
    MG_CHECK(route.stream != stream, "begin_allocate_to_pool(", pool, ", stream ", stream, ") on ", device_,
             ": that stream already allocates to private pool ", route.pool->id,
             ". Hint: a stream routes to one pool at a time; call end_allocate_to_pool(", route.pool->id,
             ") first.");
  }
  pools_->routes.push_back({stream, &target});
}

void CachingAllocator::end_allocate_to_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  BlockPool& target = pools_->private_pool(pool, "end_allocate_to_pool", device_);
  std::vector<Pools::Route>& routes = pools_->routes;
  const size_t before = routes.size();
  std::erase_if(routes, [&](const Pools::Route& route) { return route.pool == &target; });
  MG_CHECK(routes.size() != before, "end_allocate_to_pool(", pool, ") on ", device_,
           ": no stream allocates to that pool. Hint: each end_allocate_to_pool() ends a "
           "begin_allocate_to_pool() of the same pool.");
}

void CachingAllocator::release_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  BlockPool& target = pools_->private_pool(pool, "release_pool", device_);
  const Pools::Route* route = pools_->route_to(target);
  MG_CHECK(route == nullptr, "release_pool(", pool, ") on ", device_, ": stream ", route->stream,
           " still allocates to it. Hint: call end_allocate_to_pool(", pool, ") first.");
  target.released = true;
  Pools::release_free_segments(target, *backend_, stats_, segment_returning(observer_for_operation()));
  pools_->drop_if_finished(target);
}

size_t CachingAllocator::pool_reserved_bytes(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const BlockPool& target =
      pool == kDefaultPool ? pools_->shared : pools_->private_pool(pool, "pool_reserved_bytes", device_);
  return static_cast<size_t>(target.reserved_bytes);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

namespace {

template <class Visit>
void for_each_stat(MemoryStats& stats, Visit visit) {
  for (Stat* stat : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                     &stats.inactive_split_bytes, &stats.requested_bytes,
                     &stats.allocation_count, &stats.segment_count, &stats.active_count,
                     &stats.inactive_split_count}) {
    visit(*stat);
  }
  for (Stat& stat : stats.category_bytes) visit(stat);
}

}  // namespace

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for_each_stat(stats_, [](Stat& stat) { stat.reset_peak(); });
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for_each_stat(stats_, [](Stat& stat) {
    stat.allocated = 0;
    stat.freed = 0;
  });
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_backend_allocs = 0;
  stats_.num_backend_frees = 0;
}

std::string CachingAllocator::memory_summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return format_memory_summary(device_, *backend_, stats_);
}

}  // namespace mg
