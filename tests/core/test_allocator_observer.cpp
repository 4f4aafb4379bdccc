// tests/core/test_allocator_observer.cpp — the allocator reports what it does through
// AllocatorObserver (core/allocator/allocator_observer.h) and nothing when nobody listens:
// every event kind with its bytes and categories, the segments it held before the observer
// came, the factory's shapes, one observer at a time.
#include <catch2/catch.hpp>

#include <vector>

#include "core/allocator_test_support.h"
#include "memgrad/core/allocator/allocator_observer.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

using namespace allocator_test;

namespace {

struct HeardEvent {
  mg::AllocatorEvent event;
  int64_t allocated_after;  // the allocator's statistics as the observer saw them
};

class ListeningObserver final : public mg::AllocatorObserver {
 public:
  void on_allocator_event(const mg::AllocatorEvent& event, const mg::MemoryStats& stats) override {
    events.push_back({event, stats.allocated_bytes.current});
  }
  void on_existing_segments(mg::Device device, const std::vector<mg::SegmentState>& segments) override {
    existing.push_back({device, segments});
  }
  void on_tensor_allocated(const void* address, const mg::Shape& sizes, mg::DType dtype) override {
    tensors.push_back({address, sizes, dtype});
  }
  struct Existing {
    mg::Device device;
    std::vector<mg::SegmentState> segments;
  };
  std::vector<Existing> existing;
  struct Tensor {
    const void* address;
    mg::Shape sizes;
    mg::DType dtype;
  };
  std::vector<HeardEvent> events;
  std::vector<Tensor> tensors;
};

// Installs an observer for one test and removes it even when the test fails.
struct Listening {
  explicit Listening(mg::AllocatorObserver& observer) { mg::set_allocator_observer(&observer); }
  ~Listening() { mg::set_allocator_observer(nullptr); }
};

}  // namespace

TEST_CASE("the allocator reports segments, allocate, retag and free to its observer", "[allocator]") {
  CachingAllocator allocator = make_simulated(64 * MiB);
  ListeningObserver observer;
  {
    Listening listening(observer);
    Allocation a = allocator.allocate(1000, MemoryCategory::Temporary);  // rounds to 1024
    allocator.set_category(a.block, MemoryCategory::Activation);
    allocator.set_category(a.block, MemoryCategory::Activation);  // no change: no event
    allocator.free(a.block);
    allocator.empty_cache();  // returns the 2 MiB small-pool segment
  }
  REQUIRE(observer.events.size() == 5);
  const auto& segment = observer.events[0];
  CHECK(segment.event.kind == mg::AllocatorEventKind::SegmentAllocate);
  CHECK(segment.event.bytes == bytes(2 * MiB));
  CHECK(segment.event.block_bytes == bytes(2 * MiB));
  CHECK(segment.allocated_after == 0);  // reported before its first block

  const auto& allocate = observer.events[1];
  CHECK(allocate.event.kind == mg::AllocatorEventKind::Allocate);
  CHECK(allocate.event.device == Device::simulated());
  CHECK(allocate.event.bytes == 1000);
  CHECK(allocate.event.block_bytes == 1024);
  CHECK(allocate.event.category == MemoryCategory::Temporary);
  CHECK(allocate.event.address == segment.event.address);
  CHECK(allocate.allocated_after == 1024);  // reported after the statistics took it in

  const auto& retag = observer.events[2];
  CHECK(retag.event.kind == mg::AllocatorEventKind::Retag);
  CHECK(retag.event.bytes == 1000);
  CHECK(retag.event.category == MemoryCategory::Activation);
  CHECK(retag.event.previous_category == MemoryCategory::Temporary);
  CHECK(retag.event.address == allocate.event.address);

  const auto& free = observer.events[3];
  CHECK(free.event.kind == mg::AllocatorEventKind::Free);
  CHECK(free.event.bytes == -1000);
  CHECK(free.event.block_bytes == 1024);
  CHECK(free.event.category == MemoryCategory::Activation);
  CHECK(free.allocated_after == 0);

  const auto& release = observer.events[4];
  CHECK(release.event.kind == mg::AllocatorEventKind::SegmentFree);
  CHECK(release.event.address == segment.event.address);
  CHECK(release.event.bytes == -bytes(2 * MiB));

  // It held nothing when the observer came.
  REQUIRE(observer.existing.size() == 1);
  CHECK(observer.existing[0].segments.empty());
}

TEST_CASE("a new observer first hears the segments and live blocks the allocator already holds", "[allocator]") {
  CachingAllocator allocator = make_simulated(64 * MiB);
  Allocation kept = allocator.allocate(1000, MemoryCategory::Parameter);
  Allocation freed = allocator.allocate(3000, MemoryCategory::Temporary);  // 3072, after `kept`
  Allocation large = allocator.allocate(2 * MiB, MemoryCategory::Activation);
  allocator.free(freed.block);
  ListeningObserver observer;
  {
    Listening listening(observer);
    allocator.free(kept.block);
    allocator.free(large.block);
  }
  // Told once, before the first event, with the state before it.
  REQUIRE(observer.existing.size() == 1);
  CHECK(observer.existing[0].device == Device::simulated());
  const std::vector<mg::SegmentState>& segments = observer.existing[0].segments;
  REQUIRE(segments.size() == 2);
  CHECK(segments[0].address < segments[1].address);
  for (const mg::SegmentState& segment : segments) {
    REQUIRE(segment.live_blocks.size() == 1);
    const mg::LiveBlockState& block = segment.live_blocks[0];
    if (segment.small_pool) {
      CHECK(segment.bytes == bytes(2 * MiB));
      CHECK(block.address == address(kept));
      CHECK(block.requested_bytes == 1000);
      CHECK(block.block_bytes == 1024);
      CHECK(block.category == MemoryCategory::Parameter);
    } else {
      CHECK(segment.bytes == bytes(20 * MiB));
      CHECK(block.address == address(large));
      CHECK(block.block_bytes == bytes(2 * MiB));
      CHECK(block.category == MemoryCategory::Activation);
    }
  }
  REQUIRE(observer.events.size() == 2);
  CHECK(observer.events[0].event.kind == mg::AllocatorEventKind::Free);
}

TEST_CASE("nothing is reported when nobody listens, and one observer listens at a time", "[allocator]") {
  CachingAllocator allocator = make_simulated(64 * MiB);
  ListeningObserver first, second;
  Allocation before = allocator.allocate(512, MemoryCategory::Temporary);
  {
    Listening listening(first);
    CHECK(mg::allocator_observer() == &first);
    CHECK_THROWS_WITH(mg::set_allocator_observer(&second),
                      Catch::Contains("another observer already listens") && Catch::Contains("Recorder"));
    CHECK(mg::allocator_observer() == &first);
  }
  CHECK(mg::allocator_observer() == nullptr);
  allocator.free(before.block);
  CHECK(first.events.empty());
  CHECK(second.events.empty());
}

TEST_CASE("the tensor factory tells the observer each new tensor's shape and dtype", "[allocator]") {
  ListeningObserver observer;
  mg::Tensor tensor;
  {
    Listening listening(observer);
    tensor = mg::empty({3, 5}, {.dtype = mg::DType::Float16});
  }
  REQUIRE(observer.tensors.size() == 1);
  CHECK(observer.tensors[0].address == tensor.storage()->data());
  CHECK(observer.tensors[0].sizes == mg::Shape{3, 5});
  CHECK(observer.tensors[0].dtype == mg::DType::Float16);
  // The block's event (a segment's may come first, when the CPU allocator needed a new one).
  REQUIRE_FALSE(observer.events.empty());
  CHECK(observer.events.back().event.kind == mg::AllocatorEventKind::Allocate);
  CHECK(observer.events.back().event.bytes == 3 * 5 * 2);
}
