// core/allocator/block_pools.h — the caching allocator's bookkeeping (inside the allocator
// room only; core/allocator/caching_allocator.cpp is its one user): blocks, the free sets
// of a pool, and the default and private pools with the live and pending blocks.
//
// A segment is one piece of memory from the backend. It is cut into blocks laid end to
// end and linked prev/next, so that a freed block can find its neighbours and merge with
// the free ones. Every segment belongs to one BlockPool: the default one, or a private
// pool of a CUDA graph. Free blocks wait in their pool's small set (requests <= 1 MiB) or
// large set, each ordered by (stream, size, address): the first entry at or after
// (stream, size, 0) is the best fit (best_fit in caching_allocator.cpp, with the other
// decisions: rounding, pool, splitting, segment size). Live blocks are kept in a hash set
// so that free() can reject a handle it never gave out, and so that the destructor can
// find every segment. Every change to a free set goes through Pools::insert_free / erase_free, which
// tally the change of inactive-split bytes (see caching_allocator.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/error.h"

namespace mg {

struct BlockPool;

struct Block {
  uintptr_t address = 0;   // start; kept as an integer because simulated addresses are fake
  size_t size = 0;         // rounded bytes this block spans
  size_t requested = 0;    // bytes asked for (0 while free)
  StreamId stream = 0;     // the stream of the segment; blocks are reused on it only
  BlockPool* pool = nullptr;  // the pool of the segment; blocks return to it only
  MemoryCategory category = MemoryCategory::Temporary;
  bool allocated = false;  // live, or freed and awaiting other streams' events
  bool in_small_pool = false;
  int pending_events = 0;   // events still to complete before the free finishes
  std::vector<StreamId> stream_uses;  // other streams that used the live block
  Block* prev = nullptr;   // neighbours inside the same segment
  Block* next = nullptr;

  bool is_split() const { return prev != nullptr || next != nullptr; }
  void* ptr() const { return reinterpret_cast<void*>(address); }
};

// Orders free blocks by (stream, size, address); transparent so that a lookup key need not
// be a Block.
struct FreeBlockKey {
  StreamId stream;
  size_t size;
  uintptr_t address;
};

struct FreeBlockOrder {
  using is_transparent = void;
  static FreeBlockKey key(const Block* block) { return {block->stream, block->size, block->address}; }
  static FreeBlockKey key(const FreeBlockKey& key) { return key; }
  template <class Left, class Right>
  bool operator()(const Left& left, const Right& right) const {
    FreeBlockKey a = key(left), b = key(right);
    if (a.stream != b.stream) return a.stream < b.stream;
    if (a.size != b.size) return a.size < b.size;
    return a.address < b.address;
  }
};

using FreeBlockSet = std::set<Block*, FreeBlockOrder>;

// The free blocks and segment totals of one pool: the default pools (kDefaultPool) or a
// private pool.
struct BlockPool {
  explicit BlockPool(PoolId pool_id) : id(pool_id) {}
  PoolId id;
  FreeBlockSet small;  // free blocks of segments for requests <= 1 MiB
  FreeBlockSet large;
  int64_t reserved_bytes = 0;  // of its segments
  int64_t segment_count = 0;
  bool released = false;  // its owner is gone: segments go back as soon as wholly free

  FreeBlockSet& free_blocks(bool small_pool) { return small_pool ? small : large; }
};

// The net change of inactive-split bytes and blocks during one operation.
struct InactiveSplitChange {
  int64_t bytes = 0;
  int64_t count = 0;
};

struct CachingAllocator::Pools {
  BlockPool shared{kDefaultPool};
  // Live private pools, and released ones that still hold segments (`released` set).
  std::unordered_map<PoolId, std::unique_ptr<BlockPool>> private_pools;
  PoolId next_private_id = kDefaultPool + 1;
  // Streams whose requests go to a private pool (a capture may be underway on them).
  struct Route {
    StreamId stream;
    BlockPool* pool;
  };
  std::vector<Route> routes;

  std::unordered_set<Block*> live;  // blocks handed out and not yet freed
  // Blocks freed while other streams may still use them: one entry per outstanding event.
  struct PendingEvent {
    void* event;
    Block* block;
  };
  std::vector<PendingEvent> pending;
  // Blocks freed during a routing while other streams may still use them, whose events
  // are recorded once no routing is active.
  std::vector<Block*> freed_during_routing;

  FreeBlockSet& free_set_of(const Block* block) { return block->pool->free_blocks(block->in_small_pool); }

  BlockPool& pool_for(StreamId stream) {
    for (const Route& route : routes) {
      if (route.stream == stream) return *route.pool;
    }
    return shared;
  }

  // The live private pool `id`; throws mg::Error naming `operation` otherwise.
  BlockPool& private_pool(PoolId id, const char* operation, const Device& device) {
    MG_CHECK(id != kDefaultPool, operation, "(", id, ") on ", device, ": pool 0 is the default pools, "
             "not a private pool. Hint: make one with create_private_pool().");
    auto found = private_pools.find(id);
    const bool alive = found != private_pools.end() && !found->second->released;
    MG_CHECK(alive, operation, "(", id, ") on ", device, ": ",
             id < next_private_id ? "that private pool was released" : "no private pool has that id",
             ". Hint: use the id create_private_pool() returned, and only until release_pool().");
    return *found->second;
  }

  const Route* route_to(const BlockPool& pool) const {
    for (const Route& route : routes) {
      if (route.pool == &pool) return &route;
    }
    return nullptr;
  }

  void insert_free(Block* block, InactiveSplitChange& change) {
    bool inserted = free_set_of(block).insert(block).second;
    MG_ASSERT(inserted, "free block at ", block->address, " was already in its pool");
    if (block->is_split()) {
      change.bytes += static_cast<int64_t>(block->size);
      change.count += 1;
    }
  }

  void erase_free(Block* block, InactiveSplitChange& change) {
    size_t erased = free_set_of(block).erase(block);
    MG_ASSERT(erased == 1, "free block at ", block->address, " was missing from its pool");
    if (block->is_split()) {
      change.bytes -= static_cast<int64_t>(block->size);
      change.count -= 1;
    }
  }

  // Returns the segment that the free, unsplit `block` spans (and that no free set holds)
  // to the backend, after `returning` was told (the allocator reports it to its observer).
  // Such a block is not an inactive split, so those statistics do not change.
  static void return_segment(Block* block, RawBackend& backend, MemoryStats& stats, const SegmentReturning& returning) {
    returning(*block);
    const auto segment_bytes = static_cast<int64_t>(block->size);
    backend.deallocate(block->ptr(), block->size);
    stats.num_backend_frees += 1;
    stats.reserved_bytes.decrease(segment_bytes);
    stats.segment_count.decrease(1);
    block->pool->reserved_bytes -= segment_bytes;
    block->pool->segment_count -= 1;
    delete block;
  }

  // Returns every whole free segment (a free block without neighbours) of `pool`.
  static void release_free_segments(BlockPool& pool, RawBackend& backend, MemoryStats& stats,
                                    const SegmentReturning& returning) {
    for (FreeBlockSet* free_set : {&pool.small, &pool.large}) {
      for (auto it = free_set->begin(); it != free_set->end();) {
        Block* block = *it;
        if (block->is_split()) {
          ++it;
          continue;
        }
        it = free_set->erase(it);
        return_segment(block, backend, stats, returning);
      }
    }
  }

  // The first block of every segment (each has exactly one: prev == nullptr), whether
  // it is free, live or held back.
  std::vector<Block*> segment_heads() const {
    std::unordered_set<Block*> heads;  // a set: a held-back block appears once per event
    auto collect = [&](Block* block) {
      if (block->prev == nullptr) heads.insert(block);
    };
    std::vector<const BlockPool*> every_pool{&shared};
    for (const auto& [id, pool] : private_pools) every_pool.push_back(pool.get());
    for (const BlockPool* pool : every_pool) {
      for (Block* block : pool->small) collect(block);
      for (Block* block : pool->large) collect(block);
    }
    for (Block* block : live) collect(block);
    for (Block* block : freed_during_routing) collect(block);
    for (const PendingEvent& entry : pending) collect(entry.block);
    return {heads.begin(), heads.end()};
  }

  // Records one event per other stream that used the freed `block` and holds the block back
  // for them (pending_events). On failure nothing changes and the error propagates.
  void record_stream_events(Block* block, RawBackend& backend) {
    const size_t first_event = pending.size();
    pending.reserve(first_event + block->stream_uses.size());
    try {
      for (StreamId use : block->stream_uses) {
        if (void* event = backend.record_event(use)) pending.push_back({event, block});
      }
    } catch (...) {
      for (size_t i = first_event; i < pending.size(); ++i) backend.destroy_event(pending[i].event);
      pending.resize(first_event);
      throw;
    }
    block->stream_uses.clear();
    block->pending_events = static_cast<int>(pending.size() - first_event);
  }

  // Forgets a released private pool once its last segment is gone.
  void drop_if_finished(BlockPool& pool) {
    if (pool.released && pool.segment_count == 0) private_pools.erase(pool.id);
  }
};

}  // namespace mg
