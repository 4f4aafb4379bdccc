// tests/core/test_allocator_pools.cpp — private pools of the caching allocator (what CUDA
// graphs allocate from), on the simulated device.
//
// A captured graph bakes in its blocks' addresses, so the claims checked here are about
// addresses: routed requests never take default-pool blocks and unrouted ones never take
// a pool's; a pool reuses its own blocks (as a replay does); graphs may share a pool;
// release_pool returns segments; empty_cache and the out-of-memory retry leave a live
// pool alone; no event is recorded or queried while a routing is active; statistics and
// categories add up over a random mix of pools; misuse is a clear mg::Error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/allocator_test_support.h"
#include "memgrad/core/allocator/allocator_observer.h"

using namespace allocator_test;
using mg::PoolId;
using mg::StreamId;

namespace {

constexpr StreamId kCaptureStream = 7;

const mg::SimulatedBackend& simulated(const CachingAllocator& allocator) {
  return static_cast<const mg::SimulatedBackend&>(allocator.backend());
}

// Whether `inner` lies inside the `bytes` starting at `outer`.
bool inside(const Allocation& inner, const Allocation& outer, size_t bytes) {
  return address(inner) >= address(outer) && address(inner) < address(outer) + bytes;
}

// Every backend event call, and whether each event's work is done (the test decides).
struct EventCalls {
  std::vector<std::unique_ptr<bool>> done;  // one per recorded event
  int recorded = 0;
  int queried = 0;
  int synchronized = 0;
  size_t used_bytes = 0;  // of the memory, so that a test can see it all come back
  void complete_all() {
    for (auto& flag : done) *flag = true;
  }
};

// Simulated memory with events that count every call.
class CountingEventBackend final : public mg::RawBackend {
 public:
  CountingEventBackend(size_t capacity, std::shared_ptr<EventCalls> calls) : memory_(capacity), calls_(std::move(calls)) {}

  void* allocate(size_t size) override {
    void* ptr = memory_.allocate(size);
    if (ptr != nullptr) calls_->used_bytes += size;
    return ptr;
  }
  void deallocate(void* ptr, size_t size) override {
    memory_.deallocate(ptr, size);
    calls_->used_bytes -= size;
  }
  size_t capacity() const override { return memory_.capacity(); }
  std::string describe_memory() const override { return memory_.describe_memory(); }
  bool has_storage() const override { return false; }

  void* record_event(StreamId) override {
    calls_->recorded += 1;
    calls_->done.push_back(std::make_unique<bool>(false));
    return calls_->done.back().get();
  }
  bool event_done(void* event) override {
    calls_->queried += 1;
    return *static_cast<bool*>(event);
  }
  void synchronize_event(void* event) override {
    calls_->synchronized += 1;
    *static_cast<bool*>(event) = true;
  }

 private:
  mg::SimulatedBackend memory_;
  std::shared_ptr<EventCalls> calls_;
};

// Hears every allocator event for one test, and stops listening even when the test fails.
class Listener final : public mg::AllocatorObserver {
 public:
  Listener() { mg::set_allocator_observer(this); }
  ~Listener() override { mg::set_allocator_observer(nullptr); }
  void on_allocator_event(const mg::AllocatorEvent& event, const mg::MemoryStats&) override { events.push_back(event); }
  void on_existing_segments(mg::Device, const std::vector<mg::SegmentState>&) override {}
  void on_tensor_allocated(const void*, const mg::Shape&, mg::DType) override {}
  std::vector<mg::AllocatorEvent> events;
};

}  // namespace

TEST_CASE("routed requests never take default blocks, and unrouted ones never take a pool's",
          "[allocator][pools]") {
  auto allocator = make_simulated(256 * MiB);
  // The default pools cache a free 2 MiB (small) and a free 20 MiB (large) segment.
  Allocation default_small = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  Allocation default_large = allocator.allocate(3 * MiB, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(default_small.block);
  allocator.free(default_large.block);
  REQUIRE(allocator.pool_reserved_bytes(mg::kDefaultPool) == 22 * MiB);

  const PoolId pool = allocator.create_private_pool();
  CHECK(pool != mg::kDefaultPool);
  CHECK(allocator.pool_reserved_bytes(pool) == 0);
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  // Same stream, sizes the default blocks would fit: the pool makes its own segments.
  Allocation routed_small = allocator.allocate(4096, MemoryCategory::Activation, kCaptureStream);
  Allocation routed_large = allocator.allocate(3 * MiB, MemoryCategory::Activation, kCaptureStream);
  CHECK_FALSE(inside(routed_small, default_small, 2 * MiB));
  CHECK_FALSE(inside(routed_large, default_large, 20 * MiB));
  CHECK(allocator.pool_reserved_bytes(pool) == 22 * MiB);
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 22 * MiB);
  // Another stream is not routed: it gets default memory as before (a segment of its own,
  // being another stream).
  Allocation elsewhere = allocator.allocate(4096, MemoryCategory::Temporary, 0);
  CHECK(allocator.pool_reserved_bytes(pool) == 22 * MiB);
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 24 * MiB);
  allocator.free(elsewhere.block);
  allocator.end_allocate_to_pool(pool);

  // The pool's blocks are free now; unrouted requests still take the default blocks, and
  // once those are used up, new segments rather than the pool's.
  allocator.free(routed_small.block);
  allocator.free(routed_large.block);
  Allocation first = allocator.allocate(MiB, MemoryCategory::Temporary, kCaptureStream);
  Allocation second = allocator.allocate(MiB, MemoryCategory::Temporary, kCaptureStream);
  Allocation third = allocator.allocate(MiB, MemoryCategory::Temporary, kCaptureStream);
  Allocation large = allocator.allocate(3 * MiB, MemoryCategory::Temporary, kCaptureStream);
  CHECK(address(first) == address(default_small));
  CHECK(address(second) == address(default_small) + MiB);
  CHECK(address(large) == address(default_large));
  for (const Allocation& unrouted : {first, second, third, large}) {
    CHECK_FALSE(inside(unrouted, routed_small, 2 * MiB));
    CHECK_FALSE(inside(unrouted, routed_large, 20 * MiB));
  }
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 26 * MiB);  // `third` made a segment
  CHECK(allocator.pool_reserved_bytes(pool) == 22 * MiB);
  CHECK(allocator.stats().reserved_bytes.current == bytes(48 * MiB));
  for (const Allocation& unrouted : {first, second, third, large}) allocator.free(unrouted.block);
  allocator.release_pool(pool);
}

TEST_CASE("a freed pool block serves the next routed request of its pool, as a replay would",
          "[allocator][pools]") {
  auto allocator = make_simulated(64 * MiB);
  const PoolId pool = allocator.create_private_pool();

  // The capture: a temporary freed inside it is reused inside it.
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation temporary = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  Allocation output = allocator.allocate(8192, MemoryCategory::Activation, kCaptureStream);
  allocator.free(temporary.block);
  Allocation reused = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  CHECK(address(reused) == address(temporary));
  allocator.end_allocate_to_pool(pool);
  allocator.free(reused.block);

  // Unrouted requests on the same stream do not take the free pool block...
  Allocation unrouted = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  CHECK_FALSE(inside(unrouted, temporary, 2 * MiB));
  // ...a second routing of the pool does, and splits the rest of its segment after `output`.
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation again = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  Allocation after = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
  allocator.end_allocate_to_pool(pool);
  CHECK(address(again) == address(temporary));
  CHECK(address(after) == address(output) + 8192);
  CHECK(allocator.pool_reserved_bytes(pool) == 2 * MiB);
  CHECK(allocator.stats().segment_count.current == 2);

  for (const Allocation& allocation : {unrouted, output, again, after}) allocator.free(allocation.block);
  allocator.release_pool(pool);
  CHECK(allocator.stats().reserved_bytes.current == bytes(2 * MiB));  // the default segment
}

TEST_CASE("two graphs share one pool, and a third graph's pool stays apart", "[allocator][pools]") {
  auto allocator = make_simulated(64 * MiB);
  const PoolId shared = allocator.create_private_pool();
  const PoolId apart = allocator.create_private_pool();
  CHECK(shared != apart);

  // Graph one: its output stays alive after the capture, its temporary does not.
  allocator.begin_allocate_to_pool(shared, kCaptureStream);
  Allocation output_one = allocator.allocate(MiB, MemoryCategory::Activation, kCaptureStream);
  Allocation temporary_one = allocator.allocate(512 * KiB, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(temporary_one.block);
  allocator.end_allocate_to_pool(shared);

  // Graph two, captured into the same pool after graph one (and always replayed after it),
  // reuses graph one's temporary.
  allocator.begin_allocate_to_pool(shared, kCaptureStream);
  Allocation temporary_two = allocator.allocate(512 * KiB, MemoryCategory::Temporary, kCaptureStream);
  allocator.end_allocate_to_pool(shared);
  CHECK(address(temporary_two) == address(temporary_one));
  CHECK(allocator.pool_reserved_bytes(shared) == 2 * MiB);

  // Graph three has its own pool: a fresh segment, though the shared pool has room left.
  allocator.begin_allocate_to_pool(apart, kCaptureStream);
  Allocation temporary_three = allocator.allocate(256 * KiB, MemoryCategory::Temporary, kCaptureStream);
  allocator.end_allocate_to_pool(apart);
  CHECK_FALSE(inside(temporary_three, output_one, 2 * MiB));
  CHECK(allocator.pool_reserved_bytes(apart) == 2 * MiB);

  // Both sharing graphs are gone: the shared pool is released once; its segment comes back
  // when its last block is freed.
  allocator.free(temporary_two.block);
  allocator.release_pool(shared);
  CHECK(allocator.stats().reserved_bytes.current == bytes(4 * MiB));
  allocator.free(output_one.block);
  CHECK(allocator.stats().reserved_bytes.current == bytes(2 * MiB));
  CHECK(allocator.pool_reserved_bytes(apart) == 2 * MiB);
  allocator.free(temporary_three.block);
  allocator.release_pool(apart);
  CHECK(allocator.stats().reserved_bytes.current == 0);
}

TEST_CASE("release_pool returns free segments at once and the others when wholly free",
          "[allocator][pools]") {
  auto allocator = make_simulated(64 * MiB);
  const PoolId pool = allocator.create_private_pool();
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation large = allocator.allocate(3 * MiB, MemoryCategory::Activation, kCaptureStream);  // 20 MiB seg
  Allocation small_a = allocator.allocate(512, MemoryCategory::Activation, kCaptureStream);     // 2 MiB seg
  Allocation small_b = allocator.allocate(512, MemoryCategory::Activation, kCaptureStream);     // same seg
  allocator.end_allocate_to_pool(pool);
  allocator.free(large.block);
  allocator.free(small_a.block);
  mg::MemoryStats stats = allocator.stats();
  REQUIRE(stats.reserved_bytes.current == bytes(22 * MiB));
  REQUIRE(stats.num_backend_frees == 0);

  // The 20 MiB segment is free: it goes back now; the small one still holds small_b.
  allocator.release_pool(pool);
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == bytes(2 * MiB));
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.num_backend_frees == 1);
  CHECK(simulated(allocator).used_bytes() == 2 * MiB);
  CHECK(stats.inactive_split_bytes.current == bytes(2 * MiB - 512));  // small_a's hole and the tail
  CHECK_THROWS_WITH(allocator.pool_reserved_bytes(pool), Catch::Contains("was released"));

  // Its last block freed, the segment goes back too (no empty_cache needed).
  allocator.free(small_b.block);
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.segment_count.current == 0);
  CHECK(stats.num_backend_frees == 2);
  CHECK(stats.inactive_split_bytes.current == 0);
  CHECK(stats.inactive_split_count.current == 0);
  CHECK(stats.active_bytes.current == 0);
  CHECK(simulated(allocator).used_bytes() == 0);
}

TEST_CASE("empty_cache and the out-of-memory retry leave a live pool's segments alone",
          "[allocator][pools]") {
  // 24 MiB: one 20 MiB segment fits beside a 2 MiB one, two 20 MiB segments do not.
  auto allocator = make_simulated(24 * MiB);
  const PoolId pool = allocator.create_private_pool();
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation routed = allocator.allocate(3 * MiB, MemoryCategory::Activation, kCaptureStream);
  allocator.end_allocate_to_pool(pool);
  allocator.free(routed.block);
  Allocation unrouted = allocator.allocate(512, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(unrouted.block);

  allocator.empty_cache();
  CHECK(allocator.pool_reserved_bytes(pool) == 20 * MiB);
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 0);
  CHECK(allocator.stats().reserved_bytes.current == bytes(20 * MiB));

  // An unrouted 3 MiB request needs a second 20 MiB segment: the retry may not take the
  // pool's free one, so the request fails.
  CHECK_THAT(oom_message(allocator, 3 * MiB, MemoryCategory::Temporary),
             Catch::Contains("needed a new segment of 20.00 MiB"));
  CHECK(allocator.stats().num_alloc_retries == 1);
  CHECK(allocator.stats().num_ooms == 1);
  CHECK(allocator.pool_reserved_bytes(pool) == 20 * MiB);

  // Once the graph is gone the memory is the device's again.
  allocator.release_pool(pool);
  Allocation fits = allocator.allocate(3 * MiB, MemoryCategory::Temporary, kCaptureStream);
  CHECK(allocator.stats().reserved_bytes.current == bytes(20 * MiB));
  allocator.free(fits.block);
}

TEST_CASE("a routed request that hits out of memory may free the default pools' cache",
          "[allocator][pools]") {
  auto allocator = make_simulated(24 * MiB);
  Allocation unrouted = allocator.allocate(3 * MiB, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(unrouted.block);  // the default pools cache a free 20 MiB segment
  const PoolId pool = allocator.create_private_pool();
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation routed = allocator.allocate(3 * MiB, MemoryCategory::Activation, kCaptureStream);
  allocator.end_allocate_to_pool(pool);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.num_alloc_retries == 1);
  CHECK(stats.num_backend_frees == 1);
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 0);
  CHECK(allocator.pool_reserved_bytes(pool) == 20 * MiB);
  allocator.free(routed.block);
  allocator.release_pool(pool);
}

TEST_CASE("no event is recorded or queried while a routing is active", "[allocator][pools]") {
  auto calls = std::make_shared<EventCalls>();
  {
    CachingAllocator allocator(Device::simulated(), std::make_unique<CountingEventBackend>(64 * MiB, calls));
    // A block freed before the routing waits for stream 1's event.
    Allocation waiting = allocator.allocate(4096, MemoryCategory::Temporary, 0);
    allocator.record_stream(waiting.block, 1);
    allocator.free(waiting.block);
    REQUIRE(calls->recorded == 1);
    Allocation used_elsewhere = allocator.allocate(8192, MemoryCategory::Activation, 0);
    allocator.record_stream(used_elsewhere.block, 2);
    const int queried_before = calls->queried;

    const PoolId pool = allocator.create_private_pool();
    allocator.begin_allocate_to_pool(pool, kCaptureStream);
    Allocation routed = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
    Allocation unrouted = allocator.allocate(4096, MemoryCategory::Temporary, 0);
    allocator.record_stream(routed.block, 2);  // noting a use touches no device either
    allocator.free(used_elsewhere.block);      // held back, unmarked
    allocator.free(routed.block);              // held back, unmarked
    CHECK(calls->recorded == 1);
    CHECK(calls->queried == queried_before);
    CHECK(calls->synchronized == 0);
    mg::MemoryStats stats = allocator.stats();
    CHECK(stats.allocated_bytes.current == 4096);                // `unrouted`
    CHECK(stats.active_bytes.current == 4096 + 4096 + 8192 + 4096);  // and three held back
    CHECK_THROWS_WITH(allocator.empty_cache(), Catch::Contains("invalidates a CUDA graph capture"));

    // Routing over, the next allocation marks the two blocks and polls every event.
    allocator.end_allocate_to_pool(pool);
    Allocation after = allocator.allocate(512, MemoryCategory::Temporary, 0);
    CHECK(calls->recorded == 3);
    CHECK(calls->queried > queried_before);
    CHECK(allocator.stats().active_bytes.current == 4096 + 4096 + 8192 + 4096 + 512);

    // Their work done, the blocks return: the routed one to its pool, where the next routed
    // request finds it.
    calls->complete_all();
    allocator.free(after.block);
    allocator.free(unrouted.block);
    allocator.empty_cache();
    CHECK(allocator.stats().active_bytes.current == 0);
    CHECK(allocator.pool_reserved_bytes(pool) == 2 * MiB);
    allocator.begin_allocate_to_pool(pool, kCaptureStream);
    Allocation replayed = allocator.allocate(4096, MemoryCategory::Temporary, kCaptureStream);
    CHECK(address(replayed) == address(routed));
    // The allocator goes away mid-routing, holding a live pool block and an unmarked one.
    allocator.record_stream(replayed.block, 1);
    allocator.free(replayed.block);
  }
  CHECK(calls->used_bytes == 0);  // every segment went back, the pool's too
}

TEST_CASE("the observer hears pool blocks and segments like any other, and release_pool returning a segment",
          "[allocator][pools]") {
  auto allocator = make_simulated(64 * MiB);
  const PoolId pool = allocator.create_private_pool();
  std::vector<mg::AllocatorEvent> events;
  {
    Listener listener;
    allocator.begin_allocate_to_pool(pool, kCaptureStream);
    Allocation routed = allocator.allocate(1000, MemoryCategory::Temporary, kCaptureStream);
    allocator.set_category(routed.block, MemoryCategory::Activation);
    allocator.end_allocate_to_pool(pool);
    allocator.free(routed.block);
    allocator.release_pool(pool);
    events = listener.events;
  }
  REQUIRE(events.size() == 5);
  CHECK(events[0].kind == mg::AllocatorEventKind::SegmentAllocate);
  CHECK(events[0].bytes == bytes(2 * MiB));
  CHECK(events[0].stream == kCaptureStream);
  CHECK(events[1].kind == mg::AllocatorEventKind::Allocate);
  CHECK(events[1].bytes == 1000);
  CHECK(events[1].block_bytes == 1024);
  CHECK(events[1].address == events[0].address);  // the segment's first block
  CHECK(events[2].kind == mg::AllocatorEventKind::Retag);
  CHECK(events[2].previous_category == MemoryCategory::Temporary);
  CHECK(events[3].kind == mg::AllocatorEventKind::Free);
  CHECK(events[3].bytes == -1000);
  CHECK(events[3].category == MemoryCategory::Activation);
  CHECK(events[4].kind == mg::AllocatorEventKind::SegmentFree);
  CHECK(events[4].bytes == -bytes(2 * MiB));
  CHECK(events[4].address == events[0].address);
}

TEST_CASE("without caching, a pool keeps its freed blocks until it is released", "[allocator][pools]") {
  CachingAllocator allocator(Device::simulated(), std::make_unique<mg::SimulatedBackend>(64 * MiB),
                             CachingAllocator::Caching::Off);
  const PoolId pool = allocator.create_private_pool();
  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  Allocation first = allocator.allocate(1000, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(first.block);
  // Exact segments, never reused: the graph may replay into the freed one.
  Allocation second = allocator.allocate(1000, MemoryCategory::Temporary, kCaptureStream);
  CHECK(address(second) != address(first));
  CHECK(allocator.pool_reserved_bytes(pool) == 2000);
  allocator.end_allocate_to_pool(pool);
  allocator.free(second.block);
  CHECK(allocator.stats().reserved_bytes.current == 2000);

  // Default blocks go back at free, as always without caching.
  Allocation unrouted = allocator.allocate(1000, MemoryCategory::Temporary, kCaptureStream);
  allocator.free(unrouted.block);
  CHECK(allocator.pool_reserved_bytes(mg::kDefaultPool) == 0);

  allocator.release_pool(pool);
  CHECK(allocator.stats().reserved_bytes.current == 0);
  CHECK(simulated(allocator).used_bytes() == 0);
  CHECK(allocator.stats().num_backend_frees == 3);
}

TEST_CASE("misuse of private pools is a clear error", "[allocator][pools]") {
  auto allocator = make_simulated(64 * MiB);
  const PoolId pool = allocator.create_private_pool();
  const PoolId other = allocator.create_private_pool();

  CHECK_THROWS_WITH(allocator.begin_allocate_to_pool(mg::kDefaultPool, 0),
                    Catch::Contains("pool 0 is the default pools") && Catch::Contains("create_private_pool"));
  CHECK_THROWS_WITH(allocator.release_pool(mg::kDefaultPool), Catch::Contains("pool 0 is the default pools"));
  CHECK_THROWS_WITH(allocator.begin_allocate_to_pool(99, 0), Catch::Contains("no private pool has that id"));
  CHECK_THROWS_WITH(allocator.end_allocate_to_pool(pool),
                    Catch::Contains("no stream allocates to that pool"));

  allocator.begin_allocate_to_pool(pool, kCaptureStream);
  allocator.begin_allocate_to_pool(pool, kCaptureStream + 1);  // a second stream: fine
  CHECK_THROWS_WITH(allocator.begin_allocate_to_pool(other, kCaptureStream),
                    Catch::Contains("already allocates to private pool " + std::to_string(pool)) &&
                        Catch::Contains("end_allocate_to_pool"));
  CHECK_THROWS_WITH(allocator.release_pool(pool),
                    Catch::Contains("still allocates to it") && Catch::Contains("end_allocate_to_pool"));
  CHECK_THROWS_WITH(allocator.empty_cache(), Catch::Contains("while stream"));
  allocator.end_allocate_to_pool(pool);  // ends both streams
  CHECK_THROWS_WITH(allocator.end_allocate_to_pool(pool), Catch::Contains("no stream allocates"));
  allocator.empty_cache();

  allocator.release_pool(pool);
  CHECK_THROWS_WITH(allocator.release_pool(pool), Catch::Contains("that private pool was released"));
  CHECK_THROWS_WITH(allocator.begin_allocate_to_pool(pool, 0), Catch::Contains("was released"));
  CHECK_THROWS_WITH(allocator.pool_reserved_bytes(pool), Catch::Contains("was released"));
  CHECK(allocator.create_private_pool() > other);  // ids are never reused
  allocator.release_pool(other);
}

TEST_CASE("random use of the default and two private pools keeps addresses apart and statistics exact",
          "[allocator][pools]") {
  auto allocator = make_simulated(16 * GiB);
  std::mt19937 random(2024);
  std::uniform_int_distribution<int> percent(0, 99);

  constexpr StreamId kStreams = 3;  // stream 0 never routes; streams 1 and 2 may
  struct Live {
    Allocation allocation;
    size_t size;
    size_t requested;
    MemoryCategory category;
    PoolId pool;
  };
  std::vector<Live> live;
  std::array<PoolId, 2> pools{allocator.create_private_pool(), allocator.create_private_pool()};
  std::array<bool, 2> routing{false, false};  // pools[i] routes stream i + 1
  std::vector<PoolId> released;
  // Every segment is a whole number of 2 MiB granules, and the simulated device never
  // reuses an address: each granule belongs to one pool forever.
  std::map<uintptr_t, PoolId> granule_owner;

  auto served_by = [&](StreamId stream) {
    return stream != 0 && routing[stream - 1] ? pools[stream - 1] : mg::kDefaultPool;
  };
  auto live_in = [&](PoolId pool) {
    return std::count_if(live.begin(), live.end(), [&](const Live& block) { return block.pool == pool; });
  };

  for (int step = 0; step < 4000; ++step) {
    const int roll = percent(random);
    if (roll < 3) {
      // Begin or end a routing (a capture on stream 1 or 2).
      const size_t which = random() % 2;
      if (routing[which]) {
        allocator.end_allocate_to_pool(pools[which]);
      } else {
        allocator.begin_allocate_to_pool(pools[which], which + 1);
      }
      routing[which] = !routing[which];
    } else if (roll < 4) {
      // A graph goes away (its pool with it) and a new one takes its place.
      const size_t which = random() % 2;
      if (routing[which]) allocator.end_allocate_to_pool(pools[which]);
      routing[which] = false;
      allocator.release_pool(pools[which]);
      released.push_back(pools[which]);
      pools[which] = allocator.create_private_pool();
    } else if (roll < 5 && !routing[0] && !routing[1]) {
      const size_t pool_bytes = allocator.pool_reserved_bytes(pools[0]) + allocator.pool_reserved_bytes(pools[1]);
      allocator.empty_cache();
      REQUIRE(allocator.pool_reserved_bytes(pools[0]) + allocator.pool_reserved_bytes(pools[1]) == pool_bytes);
    } else if (roll < 8 && !live.empty()) {
      Live& block = live[random() % live.size()];
      block.category = static_cast<MemoryCategory>(random() % mg::kNumMemoryCategories);
      allocator.set_category(block.allocation.block, block.category);
    } else if (roll < 58 || live.empty()) {
      const size_t request = roll < 45 ? 1 + random() % (64 * KiB)
                           : roll < 55 ? 1 + random() % (4 * MiB)
                                       : 1 + random() % (16 * MiB);
      const StreamId stream = random() % kStreams;
      const auto category = static_cast<MemoryCategory>(random() % mg::kNumMemoryCategories);
      Allocation allocation = allocator.allocate(request, category, stream);
      const size_t size = allocator.block_size(allocation.block);
      const PoolId pool = served_by(stream);
      for (uintptr_t granule = address(allocation) / (2 * MiB); granule <= (address(allocation) + size - 1) / (2 * MiB);
           ++granule) {
        auto [owner, first_use] = granule_owner.emplace(granule, pool);
        REQUIRE(owner->second == pool);
      }
      for (const Live& other : live) {
        const bool apart = address(allocation) + size <= address(other.allocation) ||
                           address(other.allocation) + other.size <= address(allocation);
        REQUIRE(apart);
      }
      live.push_back({allocation, size, request, category, pool});
    } else {
      const size_t index = random() % live.size();
      allocator.free(live[index].allocation.block);
      live[index] = live.back();
      live.pop_back();
    }

    mg::MemoryStats stats = allocator.stats();
    int64_t allocated = 0;
    int64_t requested = 0;
    std::array<int64_t, mg::kNumMemoryCategories> by_category{};
    for (const Live& block : live) {
      allocated += bytes(block.size);
      requested += bytes(block.requested);
      by_category[static_cast<int>(block.category)] += bytes(block.requested);
    }
    REQUIRE(stats.allocated_bytes.current == allocated);
    REQUIRE(stats.active_bytes.current == allocated);
    REQUIRE(stats.requested_bytes.current == requested);
    REQUIRE(stats.allocation_count.current == static_cast<int64_t>(live.size()));
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) REQUIRE(stats.category_bytes[c].current == by_category[c]);
    // Reserved is the sum of the pools' segments; a released pool holds some only while
    // blocks of it live.
    REQUIRE(stats.reserved_bytes.current == bytes(simulated(allocator).used_bytes()));
    const int64_t live_pools = bytes(allocator.pool_reserved_bytes(mg::kDefaultPool) +
                                     allocator.pool_reserved_bytes(pools[0]) + allocator.pool_reserved_bytes(pools[1]));
    const bool released_hold_nothing =
        std::all_of(released.begin(), released.end(), [&](PoolId pool) { return live_in(pool) == 0; });
    if (released_hold_nothing) {
      REQUIRE(stats.reserved_bytes.current == live_pools);
    } else {
      REQUIRE(stats.reserved_bytes.current > live_pools);
    }
  }

  for (size_t which = 0; which < 2; ++which) {
    if (routing[which]) allocator.end_allocate_to_pool(pools[which]);
    allocator.release_pool(pools[which]);
  }
  for (const Live& block : live) allocator.free(block.allocation.block);
  allocator.empty_cache();
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);
  CHECK(stats.inactive_split_count.current == 0);
  CHECK(simulated(allocator).used_bytes() == 0);
  CHECK(released.size() >= 2);  // the sequence did release pools along the way
}
