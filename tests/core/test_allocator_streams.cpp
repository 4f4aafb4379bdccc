// tests/core/test_allocator_streams.cpp — stream-aware reuse in the caching allocator,
// without a GPU.
//
// A fake backend hands out simulated addresses and events whose completion the test
// decides, so every step of PyTorch's record_stream semantics can be checked by hand: a
// block is reused only on its own stream; a block other streams used waits, after free(),
// for events recorded on those streams; while it waits it is active but not allocated.
// Last, what a CPU-only build says about pinned memory.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/tensor.h"

namespace {

using mg::Allocation;
using mg::CachingAllocator;
using mg::Device;
using mg::MemoryCategory;
using mg::StreamId;

constexpr size_t MiB = size_t{1} << 20;

int64_t bytes(size_t value) { return static_cast<int64_t>(value); }
uintptr_t address(const Allocation& allocation) {
  return reinterpret_cast<uintptr_t>(allocation.ptr);
}

// What the fake backend did, kept outside it: the allocator owns (and destroys) the backend.
struct EventLog {
  struct Event {
    StreamId stream;
    bool done = false;
    bool destroyed = false;
    bool synchronized = false;
  };
  std::vector<std::unique_ptr<Event>> events;  // every event ever recorded, in order
  bool record_fails = false;                   // makes the next record_event throw

  int live() const {
    int count = 0;
    for (const auto& event : events) count += event->destroyed ? 0 : 1;
    return count;
  }
  // Completes every event recorded so far on `stream` (its work "ran").
  void complete(StreamId stream) {
    for (const auto& event : events) {
      if (event->stream == stream) event->done = true;
    }
  }
};

// Simulated memory plus events controlled by the test.
class FakeStreamBackend final : public mg::RawBackend {
 public:
  FakeStreamBackend(size_t capacity, std::shared_ptr<EventLog> log)
      : memory_(capacity), log_(std::move(log)) {}

  void* allocate(size_t size) override { return memory_.allocate(size); }
  void deallocate(void* ptr, size_t size) override { memory_.deallocate(ptr, size); }
  size_t capacity() const override { return memory_.capacity(); }
  std::string describe_memory() const override { return memory_.describe_memory(); }
  bool has_storage() const override { return false; }

  void* record_event(StreamId stream) override {
    if (log_->record_fails) throw mg::Error("fake event failure");
    log_->events.push_back(std::make_unique<EventLog::Event>(EventLog::Event{stream}));
    return log_->events.back().get();
  }
  bool event_done(void* event) override { return as_event(event).done; }
  void synchronize_event(void* event) override {
    as_event(event).done = true;
    as_event(event).synchronized = true;
  }
  void destroy_event(void* event) override {
    CHECK_FALSE(as_event(event).destroyed);  // destroyed exactly once (CHECK: may run in a destructor)
    as_event(event).destroyed = true;
  }

 private:
  static EventLog::Event& as_event(void* event) { return *static_cast<EventLog::Event*>(event); }

  mg::SimulatedBackend memory_;
  std::shared_ptr<EventLog> log_;
};

struct Fixture {
  std::shared_ptr<EventLog> log = std::make_shared<EventLog>();
  CachingAllocator allocator;

  explicit Fixture(size_t capacity = 64 * MiB, Device device = Device::simulated())
      : allocator(device, std::make_unique<FakeStreamBackend>(capacity, log)) {}
};

constexpr StreamId kStreamOne = 1;
constexpr StreamId kStreamTwo = 2;

}  // namespace

TEST_CASE("a block freed on one stream is not reused by another", "[allocator][streams]") {
  Fixture f;
  Allocation on_one = f.allocator.allocate(4096, MemoryCategory::Temporary, kStreamOne);
  f.allocator.free(on_one.block);
  // Stream two may not see stream one's block (its work may still be reading it): a second
  // 2 MiB segment is made.
  Allocation on_two = f.allocator.allocate(4096, MemoryCategory::Temporary, kStreamTwo);
  CHECK(address(on_two) != address(on_one));
  CHECK(f.allocator.stats().segment_count.current == 2);
  CHECK(f.allocator.stats().reserved_bytes.current == bytes(4 * MiB));
  // Stream one gets its block back.
  Allocation again_on_one = f.allocator.allocate(4096, MemoryCategory::Temporary, kStreamOne);
  CHECK(address(again_on_one) == address(on_one));
  CHECK(f.log->events.empty());  // no stream was recorded: no events
  f.allocator.free(on_two.block);
  f.allocator.free(again_on_one.block);
}

TEST_CASE("a record_stream'd block waits for its event before it is reused",
          "[allocator][streams]") {
  Fixture f;
  Allocation used = f.allocator.allocate(4000, MemoryCategory::Activation, 0);  // 4096 B
  f.allocator.record_stream(used.block, kStreamOne);
  f.allocator.record_stream(used.block, kStreamOne);  // a second note adds nothing
  f.allocator.free(used.block);

  // One event, recorded on stream one at free time; not done yet.
  REQUIRE(f.log->events.size() == 1);
  CHECK(f.log->events[0]->stream == kStreamOne);
  mg::MemoryStats stats = f.allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);          // the tensor is gone...
  CHECK(stats.allocation_count.current == 0);
  CHECK(stats.requested_bytes.current == 0);
  CHECK(stats.category(MemoryCategory::Activation).current == 0);
  CHECK(stats.active_bytes.current == 4096);          // ...but stream one may still use it
  CHECK(stats.active_count.current == 1);
  CHECK(stats.reserved_bytes.current == bytes(2 * MiB));
  // The rest of the segment is an inactive split; the waiting block is not.
  CHECK(stats.inactive_split_bytes.current == bytes(2 * MiB - 4096));

  // Not reused while the event is pending: the request takes the rest of the segment.
  Allocation next = f.allocator.allocate(4096, MemoryCategory::Temporary, 0);
  CHECK(address(next) == address(used) + 4096);
  CHECK(f.allocator.stats().active_bytes.current == 8192);
  CHECK(f.allocator.stats().allocated_bytes.current == 4096);
  CHECK(f.log->live() == 1);

  // Stream one's work completes; the next allocation finishes the free and reuses it.
  f.log->complete(kStreamOne);
  Allocation reused = f.allocator.allocate(4096, MemoryCategory::Temporary, 0);
  CHECK(address(reused) == address(used));
  CHECK(f.log->live() == 0);
  CHECK_FALSE(f.log->events[0]->synchronized);  // polled, never waited for
  stats = f.allocator.stats();
  CHECK(stats.active_bytes.current == stats.allocated_bytes.current);
  CHECK(stats.active_count.current == 2);
  CHECK(stats.allocation_count.current == 2);
  CHECK(stats.segment_count.current == 1);
  f.allocator.free(next.block);
  f.allocator.free(reused.block);
  stats = f.allocator.stats();
  CHECK(stats.active_bytes.current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);  // merged back into one free segment
}

TEST_CASE("a block used on two other streams waits for both", "[allocator][streams]") {
  Fixture f;
  Allocation used = f.allocator.allocate(MiB, MemoryCategory::Temporary, 0);
  f.allocator.record_stream(used.block, kStreamOne);
  f.allocator.record_stream(used.block, kStreamTwo);
  f.allocator.record_stream(used.block, 0);  // its own stream: ordered, no event needed
  f.allocator.free(used.block);
  REQUIRE(f.log->events.size() == 2);

  f.log->complete(kStreamTwo);
  Allocation other = f.allocator.allocate(512, MemoryCategory::Temporary, 0);
  CHECK(f.log->live() == 1);  // stream two's event is done and gone; stream one's waits
  CHECK(f.allocator.stats().active_bytes.current == bytes(MiB + 512));

  f.log->complete(kStreamOne);
  f.allocator.free(other.block);  // free() does not look at events; allocate() does
  CHECK(f.log->live() == 1);
  Allocation again = f.allocator.allocate(MiB, MemoryCategory::Temporary, 0);
  CHECK(address(again) == address(used));
  CHECK(f.log->live() == 0);
  f.allocator.free(again.block);
}

TEST_CASE("host memory waits even for its own stream", "[allocator][streams]") {
  // On the CPU (pinned memory) the next owner of a block is the host, which no stream
  // orders: a use on stream 0 needs an event too.
  Fixture f(64 * MiB, Device::cpu());
  Allocation pinned = f.allocator.allocate(4096, MemoryCategory::Input, 0);
  f.allocator.record_stream(pinned.block, 0);
  f.allocator.free(pinned.block);
  REQUIRE(f.log->events.size() == 1);
  CHECK(f.log->events[0]->stream == 0);
  Allocation next = f.allocator.allocate(4096, MemoryCategory::Input, 0);
  CHECK(address(next) != address(pinned));
  f.log->complete(0);
  Allocation reused = f.allocator.allocate(4096, MemoryCategory::Input, 0);
  CHECK(address(reused) == address(pinned));
  f.allocator.free(next.block);
  f.allocator.free(reused.block);
}

TEST_CASE("empty_cache waits for pending blocks and returns their segments",
          "[allocator][streams]") {
  Fixture f;
  Allocation used = f.allocator.allocate(3 * MiB, MemoryCategory::Temporary, 0);  // 20 MiB seg
  f.allocator.record_stream(used.block, kStreamOne);
  f.allocator.free(used.block);
  CHECK(f.allocator.stats().active_bytes.current == bytes(3 * MiB));

  f.allocator.empty_cache();
  REQUIRE(f.log->events.size() == 1);
  CHECK(f.log->events[0]->synchronized);
  CHECK(f.log->live() == 0);
  mg::MemoryStats stats = f.allocator.stats();
  CHECK(stats.active_bytes.current == 0);
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.segment_count.current == 0);
  CHECK(stats.num_backend_frees == 1);
}

TEST_CASE("out of memory waits for pending blocks before giving up", "[allocator][streams]") {
  // 24 MiB: one 20 MiB segment fits, two do not. 19 MiB requests get their own 20 MiB
  // segment, unsplit (a 1 MiB rest is not worth keeping in the large pool).
  Fixture f(24 * MiB);
  Allocation used = f.allocator.allocate(19 * MiB, MemoryCategory::Temporary, 0);
  f.allocator.record_stream(used.block, kStreamOne);
  f.allocator.free(used.block);

  // The pending block cannot serve this request and the backend has no room for a second
  // segment, so the allocator waits for the event, returns the now free segment and
  // retries.
  Allocation next = f.allocator.allocate(19 * MiB, MemoryCategory::Temporary, 0);
  REQUIRE(next.ptr != nullptr);
  CHECK(f.log->events[0]->synchronized);
  mg::MemoryStats stats = f.allocator.stats();
  CHECK(stats.num_alloc_retries == 1);
  CHECK(stats.num_ooms == 0);
  CHECK(stats.num_backend_allocs == 2);
  CHECK(stats.num_backend_frees == 1);
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.active_bytes.current == bytes(20 * MiB));
  f.allocator.free(next.block);
}

TEST_CASE("a backend without events frees record_stream'd blocks at once",
          "[allocator][streams]") {
  CachingAllocator allocator(Device::simulated(), std::make_unique<mg::SimulatedBackend>(64 * MiB));
  Allocation used = allocator.allocate(4096, MemoryCategory::Temporary, 0);
  allocator.record_stream(used.block, kStreamOne);
  allocator.free(used.block);
  CHECK(allocator.stats().active_bytes.current == 0);
  Allocation reused = allocator.allocate(4096, MemoryCategory::Temporary, 0);
  CHECK(address(reused) == address(used));
  allocator.free(reused.block);
}

TEST_CASE("record_stream and free of a waiting block are checked", "[allocator][streams]") {
  Fixture f;
  f.allocator.record_stream(nullptr, kStreamOne);  // zero-byte allocations: ignored
  Allocation used = f.allocator.allocate(4096, MemoryCategory::Temporary, 0);
  f.allocator.record_stream(used.block, kStreamOne);

  // A failing event leaves the block live, so the free can be tried again.
  f.log->record_fails = true;
  CHECK_THROWS_WITH(f.allocator.free(used.block), Catch::Contains("fake event failure"));
  CHECK(f.allocator.stats().allocated_bytes.current == 4096);
  f.log->record_fails = false;
  f.allocator.free(used.block);
  CHECK(f.allocator.stats().allocated_bytes.current == 0);

  // The block waits for its event: freeing it again or recording on it is a mistake.
  CHECK_THROWS_WITH(f.allocator.free(used.block), Catch::Contains("already freed"));
  CHECK_THROWS_WITH(f.allocator.record_stream(used.block, kStreamTwo),
                    Catch::Contains("not live"));
  f.log->complete(kStreamOne);
  f.allocator.empty_cache();
  CHECK(f.allocator.stats().reserved_bytes.current == 0);
}

TEST_CASE("destroying the allocator destroys pending events", "[allocator][streams]") {
  auto log = std::make_shared<EventLog>();
  {
    CachingAllocator allocator(Device::simulated(),
                               std::make_unique<FakeStreamBackend>(64 * MiB, log));
    Allocation first = allocator.allocate(4096, MemoryCategory::Temporary, 0);
    Allocation second = allocator.allocate(4096, MemoryCategory::Temporary, 0);
    allocator.record_stream(first.block, kStreamOne);
    allocator.record_stream(first.block, kStreamTwo);
    allocator.free(first.block);  // pending, the head of its segment, with two events
    allocator.free(second.block);
    CHECK(log->live() == 2);
  }
  CHECK(log->live() == 0);
}

TEST_CASE("pinned memory is for CPU tensors, and needs CUDA", "[allocator][streams]") {
  const mg::Tensor pageable = mg::ones({4});
  CHECK_FALSE(pageable.is_pinned());
  CHECK_THROWS_WITH(mg::empty({4}, {.device = Device::simulated(), .pin_memory = true}),
                    Catch::Contains("CPU tensors only"));
  CHECK_THROWS_WITH(mg::ones({4}, {.device = Device::simulated()}).pin_memory(),
                    Catch::Contains("only CPU tensors"));
#ifndef MG_WITH_CUDA
  CHECK_THROWS_WITH(mg::empty({4}, {.pin_memory = true}),
                    Catch::Contains("built without CUDA support"));
  CHECK_THROWS_WITH(pageable.pin_memory(), Catch::Contains("built without CUDA support"));
#endif
}
