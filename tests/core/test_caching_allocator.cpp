// tests/core/test_caching_allocator.cpp — the caching allocator's algorithm against
// hand-computed values: rounding, segment sizes, splitting, coalescing, best fit, streams,
// empty_cache, concurrency, and the host and simulated backends and the registry
// (statistics and out-of-memory: test_allocator_statistics.cpp).
//
// Most tests run on a simulated backend of small capacity, so every segment, split and
// retry is visible in the statistics and in the (fake, 512-aligned) addresses. The
// expected numbers come from the rules in caching_allocator.h, worked out by hand in the
// comments.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/host_backend.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "core/allocator_test_support.h"
#include "memgrad/core/error.h"

using namespace allocator_test;

TEST_CASE("requests round up to 512 bytes and pick their segment size", "[allocator]") {
  CHECK(CachingAllocator::round_size(0) == 0);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(MiB + 1) == MiB + 512);

  CHECK(CachingAllocator::segment_size_for(512) == 2 * MiB);        // small pool
  CHECK(CachingAllocator::segment_size_for(MiB) == 2 * MiB);        // still small
  CHECK(CachingAllocator::segment_size_for(MiB + 512) == 20 * MiB);  // large, < 10 MiB
  CHECK(CachingAllocator::segment_size_for(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size_for(10 * MiB) == 10 * MiB);  // own segment
  CHECK(CachingAllocator::segment_size_for(13 * MiB) == 14 * MiB);  // rounded to 2 MiB
  CHECK(CachingAllocator::segment_size_for(13 * MiB + 512) == 14 * MiB);
}

TEST_CASE("zero-byte allocations and free(nullptr) touch nothing", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation empty = allocator.allocate(0, MemoryCategory::Parameter);
  CHECK(empty.ptr == nullptr);
  CHECK(empty.block == nullptr);
  allocator.free(nullptr);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocation_count.allocated == 0);
  CHECK(stats.requested_bytes.allocated == 0);
  CHECK(stats.num_backend_allocs == 0);
  CHECK(stats.category(MemoryCategory::Parameter).peak == 0);
}

TEST_CASE("a small request takes a 2 MiB segment and splits it", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation one_byte = allocator.allocate(1, MemoryCategory::Temporary);
  REQUIRE(one_byte.ptr != nullptr);
  CHECK(address(one_byte) % 512 == 0);
  CHECK(allocator.block_size(one_byte.block) == 512);
  CHECK(allocator.requested_size(one_byte.block) == 1);

  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 512);
  CHECK(stats.active_bytes.current == 512);
  CHECK(stats.requested_bytes.current == 1);
  CHECK(stats.reserved_bytes.current == bytes(2 * MiB));
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.num_backend_allocs == 1);
  // The rest of the segment is a free block inside a segment in use.
  CHECK(stats.inactive_split_bytes.current == bytes(2 * MiB - 512));
  CHECK(stats.inactive_split_count.current == 1);
  allocator.free(one_byte.block);
}

TEST_CASE("large requests: 20 MiB segments below 10 MiB, their own segment above",
          "[allocator]") {
  auto allocator = make_simulated(64 * MiB);

  // 13 MiB: its own 14 MiB segment; the 1 MiB rest is not more than 1 MiB, so the block
  // keeps the whole segment.
  Allocation thirteen = allocator.allocate(13 * MiB, MemoryCategory::Activation);
  mg::MemoryStats stats = allocator.stats();
  CHECK(allocator.block_size(thirteen.block) == 14 * MiB);
  CHECK(stats.reserved_bytes.current == bytes(14 * MiB));
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.allocated_bytes.current == bytes(14 * MiB));
  CHECK(stats.requested_bytes.current == bytes(13 * MiB));
  CHECK(stats.inactive_split_bytes.current == 0);

  // 3 MiB: a 20 MiB segment, split because the 17 MiB rest is more than 1 MiB.
  Allocation three = allocator.allocate(3 * MiB, MemoryCategory::Activation);
  stats = allocator.stats();
  CHECK(allocator.block_size(three.block) == 3 * MiB);
  CHECK(stats.reserved_bytes.current == bytes(34 * MiB));
  CHECK(stats.segment_count.current == 2);
  CHECK(stats.allocated_bytes.current == bytes(17 * MiB));
  CHECK(stats.inactive_split_bytes.current == bytes(17 * MiB));
  CHECK(stats.inactive_split_count.current == 1);

  // 19 MiB: more than the 17 MiB hole, so a new 20 MiB segment, whose 1 MiB rest is not
  // split off.
  Allocation nineteen = allocator.allocate(19 * MiB, MemoryCategory::Activation);
  CHECK(allocator.block_size(nineteen.block) == 20 * MiB);
  CHECK(allocator.stats().reserved_bytes.current == bytes(54 * MiB));

  // 12 MiB after freeing the 14 MiB block: the free blocks that fit are the cached 14 MiB
  // segment and the 17 MiB hole; best fit takes the 14 MiB one and splits off 2 MiB.
  allocator.free(thirteen.block);
  Allocation twelve = allocator.allocate(12 * MiB, MemoryCategory::Activation);
  CHECK(address(twelve) == address(thirteen));
  CHECK(allocator.block_size(twelve.block) == 12 * MiB);
  stats = allocator.stats();
  CHECK(stats.num_backend_allocs == 3);
  CHECK(stats.inactive_split_bytes.current == bytes(19 * MiB));
  CHECK(stats.inactive_split_count.current == 2);

  allocator.free(three.block);
  allocator.free(twelve.block);
  allocator.free(nineteen.block);
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);
  CHECK(stats.inactive_split_count.current == 0);
  CHECK(stats.reserved_bytes.current == bytes(54 * MiB));  // cached
}

TEST_CASE("two small blocks share a segment and a freed one is an inactive split",
          "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation first = allocator.allocate(1000, MemoryCategory::Temporary);   // 1024
  Allocation second = allocator.allocate(2000, MemoryCategory::Temporary);  // 2048
  CHECK(address(second) == address(first) + 1024);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.allocated_bytes.current == 3072);
  CHECK(stats.inactive_split_bytes.current == bytes(2 * MiB - 3072));
  CHECK(stats.inactive_split_count.current == 1);

  // Freeing the first leaves a 1024-byte hole before `second`: two inactive splits.
  allocator.free(first.block);
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 2048);
  CHECK(stats.inactive_split_bytes.current == bytes(2 * MiB - 2048));
  CHECK(stats.inactive_split_count.current == 2);

  // Freeing the second merges all three into one whole free segment: no longer a split.
  allocator.free(second.block);
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);
  CHECK(stats.inactive_split_count.current == 0);
  CHECK(stats.reserved_bytes.current == bytes(2 * MiB));
  CHECK(stats.inactive_split_count.peak == 2);
}

TEST_CASE("freed neighbours coalesce and serve a larger request", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation a = allocator.allocate(256 * KiB, MemoryCategory::Temporary);
  Allocation b = allocator.allocate(256 * KiB, MemoryCategory::Temporary);
  Allocation c = allocator.allocate(256 * KiB, MemoryCategory::Temporary);
  const uintptr_t base = address(a);
  CHECK(address(b) == base + 256 * KiB);
  CHECK(address(c) == base + 512 * KiB);

  // Free a and b (c keeps the segment split): they merge into 512 KiB at the base.
  allocator.free(a.block);
  allocator.free(b.block);
  CHECK(allocator.stats().inactive_split_count.current == 2);  // [a+b] and the tail after c
  Allocation merged = allocator.allocate(512 * KiB, MemoryCategory::Temporary);
  CHECK(address(merged) == base);

  // Free in the order c, merged: the whole segment merges back and serves 1 MiB from its base.
  allocator.free(c.block);
  allocator.free(merged.block);
  Allocation whole = allocator.allocate(MiB, MemoryCategory::Temporary);
  CHECK(address(whole) == base);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.num_backend_allocs == 1);
  CHECK(stats.inactive_split_bytes.current == bytes(MiB));
  allocator.free(whole.block);
}

TEST_CASE("best fit takes the smallest free block that is large enough", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  // Layout of the segment: [big 4096][pin 512][small 1024][pin 512][tail ...]
  Allocation big = allocator.allocate(4096, MemoryCategory::Temporary);
  Allocation pin1 = allocator.allocate(512, MemoryCategory::Temporary);
  Allocation small = allocator.allocate(1024, MemoryCategory::Temporary);
  Allocation pin2 = allocator.allocate(512, MemoryCategory::Temporary);
  const uintptr_t base = address(big);
  const uintptr_t small_address = base + 4096 + 512;
  CHECK(address(small) == small_address);
  allocator.free(big.block);
  allocator.free(small.block);

  // 1000 B (1024): the 1024 hole, not the 4096 hole at the base nor the tail.
  Allocation fits_small = allocator.allocate(1000, MemoryCategory::Temporary);
  CHECK(address(fits_small) == small_address);
  // 2048: the 4096 hole at the base (smaller than the tail), split.
  Allocation fits_big = allocator.allocate(2048, MemoryCategory::Temporary);
  CHECK(address(fits_big) == base);
  // 2048 again: the 2048 left of the base hole.
  Allocation rest_of_big = allocator.allocate(2048, MemoryCategory::Temporary);
  CHECK(address(rest_of_big) == base + 2048);
  CHECK(allocator.stats().segment_count.current == 1);

  for (const Allocation& allocation : {pin1, pin2, fits_small, fits_big, rest_of_big}) {
    allocator.free(allocation.block);
  }
  CHECK(allocator.stats().inactive_split_bytes.current == 0);
}

TEST_CASE("blocks are reused only on the stream they were made for", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation on_stream_one = allocator.allocate(512, MemoryCategory::Temporary, 1);
  allocator.free(on_stream_one.block);
  Allocation on_stream_zero = allocator.allocate(512, MemoryCategory::Temporary, 0);
  CHECK(allocator.stats().segment_count.current == 2);
  Allocation again_on_one = allocator.allocate(512, MemoryCategory::Temporary, 1);
  CHECK(address(again_on_one) == address(on_stream_one));
  CHECK(allocator.stats().segment_count.current == 2);
  allocator.free(on_stream_zero.block);
  allocator.free(again_on_one.block);
}

TEST_CASE("empty_cache returns free segments and keeps those in use", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  // (The 12 MiB request comes before the 3 MiB one, which would otherwise leave a 17 MiB
  // hole that the 12 MiB request would fill.)
  Allocation small = allocator.allocate(MiB, MemoryCategory::Temporary);       // 2 MiB seg
  Allocation large = allocator.allocate(12 * MiB, MemoryCategory::Temporary);  // 12 MiB seg
  Allocation medium = allocator.allocate(3 * MiB, MemoryCategory::Temporary);  // 20 MiB seg
  allocator.free(medium.block);
  allocator.free(large.block);
  CHECK(allocator.stats().reserved_bytes.current == bytes(34 * MiB));

  allocator.empty_cache();
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == bytes(2 * MiB));
  CHECK(stats.segment_count.current == 1);
  CHECK(stats.num_backend_frees == 2);
  CHECK(static_cast<const mg::SimulatedBackend&>(allocator.backend()).used_bytes() == 2 * MiB);

  allocator.free(small.block);
  CHECK(allocator.stats().reserved_bytes.current == bytes(2 * MiB));  // cached until asked
  allocator.empty_cache();
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.segment_count.current == 0);
  CHECK(stats.num_backend_frees == 3);
  CHECK(stats.reserved_bytes.peak == bytes(34 * MiB));
}

TEST_CASE("freeing a block twice is an error, not a corruption", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation a = allocator.allocate(512, MemoryCategory::Temporary);
  Allocation keep = allocator.allocate(512, MemoryCategory::Temporary);
  allocator.free(a.block);
  CHECK_THROWS_AS(allocator.free(a.block), mg::Error);
  CHECK(allocator.stats().allocation_count.current == 1);
  allocator.free(keep.block);
}

TEST_CASE("random allocations never overlap and the statistics add up", "[allocator]") {
  auto allocator = make_simulated(512 * MiB);
  std::mt19937 random(1234);
  std::uniform_int_distribution<int> choice(0, 99);
  std::vector<Allocation> live;
  std::map<uintptr_t, size_t> extents;  // address -> block size of live blocks
  int64_t expected_requested = 0;
  for (int step = 0; step < 3000; ++step) {
    const int roll = choice(random);
    if (roll < 55 || live.empty()) {
      // Sizes across both pools: mostly small, sometimes a few MiB, rarely > 10 MiB.
      size_t request = roll < 40 ? 1 + random() % (64 * KiB)
                     : roll < 52 ? 1 + random() % (4 * MiB)
                                 : 1 + random() % (16 * MiB);
      Allocation allocation = allocator.allocate(request, MemoryCategory::Temporary,
                                                 random() % 2);
      const size_t size = allocator.block_size(allocation.block);
      REQUIRE(size >= request);
      REQUIRE(address(allocation) % 512 == 0);
      auto after = extents.lower_bound(address(allocation));
      if (after != extents.end()) REQUIRE(address(allocation) + size <= after->first);
      if (after != extents.begin()) {
        auto before = std::prev(after);
        REQUIRE(before->first + before->second <= address(allocation));
      }
      extents[address(allocation)] = size;
      live.push_back(allocation);
      expected_requested += static_cast<int64_t>(request);
    } else {
      const size_t index = random() % live.size();
      expected_requested -= static_cast<int64_t>(allocator.requested_size(live[index].block));
      extents.erase(address(live[index]));
      allocator.free(live[index].block);
      live[index] = live.back();
      live.pop_back();
    }
    if (step % 100 == 0) {
      // With the whole free segments returned, reserved - allocated is exactly the inactive split.
      allocator.empty_cache();
      mg::MemoryStats stats = allocator.stats();
      int64_t expected_allocated = 0;
      for (const auto& [start, size] : extents) expected_allocated += static_cast<int64_t>(size);
      REQUIRE(stats.allocated_bytes.current == expected_allocated);
      REQUIRE(stats.requested_bytes.current == expected_requested);
      REQUIRE(stats.allocation_count.current == static_cast<int64_t>(live.size()));
      REQUIRE(stats.reserved_bytes.current - stats.allocated_bytes.current ==
              stats.inactive_split_bytes.current);
    }
  }
  for (const Allocation& allocation : live) allocator.free(allocation.block);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);
  CHECK(stats.inactive_split_count.current == 0);
  allocator.empty_cache();
  CHECK(allocator.stats().reserved_bytes.current == 0);
  CHECK(static_cast<const mg::SimulatedBackend&>(allocator.backend()).used_bytes() == 0);
}

TEST_CASE("threads may allocate and free concurrently", "[allocator]") {
  auto allocator = make_simulated(GiB);
  std::vector<std::thread> threads;
  for (int thread_index = 0; thread_index < 4; ++thread_index) {
    threads.emplace_back([&allocator, thread_index] {
      std::mt19937 random(thread_index);
      std::vector<Allocation> mine;
      for (int step = 0; step < 2000; ++step) {
        if (mine.empty() || random() % 3 != 0) {
          mine.push_back(allocator.allocate(1 + random() % (3 * MiB), MemoryCategory::Input));
        } else {
          allocator.free(mine.back().block);
          mine.pop_back();
        }
        if (mine.size() > 50) {
          for (const Allocation& allocation : mine) allocator.free(allocation.block);
          mine.clear();
        }
      }
      for (const Allocation& allocation : mine) allocator.free(allocation.block);
    });
  }
  for (std::thread& thread : threads) thread.join();
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.requested_bytes.current == 0);
  CHECK(stats.category(MemoryCategory::Input).current == 0);
  CHECK(stats.inactive_split_bytes.current == 0);
}

TEST_CASE("host blocks handed to several threads at once never overlap, while another empties the cache",
          "[allocator]") {
  // Each thread fills its blocks with its own byte and checks them before freeing: a block
  // given to two threads at once, or a segment returned while in use, shows as a wrong byte
  // (or, under the sanitizers, as a use after free).
  CachingAllocator allocator(Device::cpu(), std::make_unique<mg::HostBackend>());
  std::atomic<bool> done{false};
  std::atomic<int> inconsistent_stats{0};  // counted here, checked on the test's thread (Catch2's)
  std::thread emptier([&] {
    while (!done.load()) {
      allocator.empty_cache();
      const mg::MemoryStats stats = allocator.stats();
      inconsistent_stats += stats.allocated_bytes.current > stats.reserved_bytes.current;
      std::this_thread::yield();
    }
  });
  std::atomic<int> wrong_bytes{0};
  std::vector<std::thread> threads;
  for (int thread_index = 0; thread_index < 4; ++thread_index) {
    threads.emplace_back([&, thread_index] {
      std::mt19937 random(100 + thread_index);
      const auto mark = static_cast<unsigned char>(0x10 + thread_index);
      std::vector<std::pair<Allocation, size_t>> mine;
      auto release = [&](const std::pair<Allocation, size_t>& entry) {
        const auto* bytes = static_cast<const unsigned char*>(entry.first.ptr);
        for (size_t i = 0; i < entry.second; i += 61) wrong_bytes += bytes[i] != mark;
        wrong_bytes += bytes[entry.second - 1] != mark;
        allocator.free(entry.first.block);
      };
      for (int step = 0; step < 1500; ++step) {
        if (mine.empty() || random() % 3 != 0) {
          // Small and large pools both: up to 3 MiB.
          const size_t bytes = 1 + random() % (step % 4 == 0 ? 3 * MiB : 4096);
          const Allocation allocation = allocator.allocate(bytes, MemoryCategory::Temporary);
          std::memset(allocation.ptr, mark, bytes);
          mine.emplace_back(allocation, bytes);
        } else {
          release(mine.back());
          mine.pop_back();
        }
        if (mine.size() > 40) {
          for (const auto& entry : mine) release(entry);
          mine.clear();
        }
      }
      for (const auto& entry : mine) release(entry);
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  emptier.join();
  CHECK(wrong_bytes.load() == 0);
  CHECK(inconsistent_stats.load() == 0);
  allocator.empty_cache();
  const mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.segment_count.current == 0);
}

TEST_CASE("the host backend gives 64-byte aligned, writable memory", "[allocator]") {
  mg::HostBackend backend;
  void* raw = backend.allocate(100);
  REQUIRE(raw != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(raw) % 64 == 0);
  CHECK(backend.used_bytes() == 128);
  CHECK(backend.describe_memory() == "host memory (unbounded), used 128 B");
  backend.deallocate(raw, 100);
  CHECK(backend.used_bytes() == 0);

  CachingAllocator allocator(Device::cpu(), std::make_unique<mg::HostBackend>());
  Allocation small = allocator.allocate(100, MemoryCategory::Temporary);
  Allocation odd = allocator.allocate(777, MemoryCategory::Temporary);
  Allocation large = allocator.allocate(3 * MiB, MemoryCategory::Temporary);
  for (const Allocation& allocation : {small, odd, large}) {
    CHECK(address(allocation) % 64 == 0);
  }
  std::memset(large.ptr, 0x5a, 3 * MiB);
  std::memset(small.ptr, 0x11, 100);
  std::memset(odd.ptr, 0x22, 777);
  const auto* large_bytes = static_cast<const unsigned char*>(large.ptr);
  CHECK(large_bytes[0] == 0x5a);
  CHECK(large_bytes[3 * MiB - 1] == 0x5a);
  CHECK(static_cast<const unsigned char*>(small.ptr)[99] == 0x11);
  CHECK(static_cast<const unsigned char*>(odd.ptr)[0] == 0x22);
  CHECK(allocator.backend().has_storage());
  for (const Allocation& allocation : {small, odd, large}) allocator.free(allocation.block);
}

TEST_CASE("the simulated backend hands out distinct aligned fake addresses", "[allocator]") {
  mg::SimulatedBackend backend(10 * MiB);
  CHECK_FALSE(backend.has_storage());
  void* first = backend.allocate(1000);
  void* second = backend.allocate(MiB);
  CHECK(reinterpret_cast<uintptr_t>(first) == mg::SimulatedBackend::kFirstAddress);
  CHECK(reinterpret_cast<uintptr_t>(second) == mg::SimulatedBackend::kFirstAddress + 1024);
  CHECK(backend.used_bytes() == MiB + 1024);
  CHECK(backend.allocate(9 * MiB) == nullptr);  // would exceed 10 MiB
  backend.deallocate(first, 1000);
  CHECK(backend.describe_memory() == "simulated device: capacity 10.00 MiB, used 1.00 MiB");
  CHECK_THROWS_AS(mg::SimulatedBackend(0), mg::Error);
}

TEST_CASE("without caching every request is its own segment, of exactly its bytes, returned at free",
          "[allocator]") {
  CachingAllocator allocator(Device::simulated(), std::make_unique<mg::SimulatedBackend>(64 * MiB),
                             CachingAllocator::Caching::Off);
  CHECK(allocator.caching() == CachingAllocator::Caching::Off);
  Allocation first = allocator.allocate(1000, MemoryCategory::Parameter);
  Allocation second = allocator.allocate(3 * MiB + 7, MemoryCategory::Activation);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == bytes(1000 + 3 * MiB + 7));  // no rounding, no spare
  CHECK(stats.segment_count.current == 2);
  CHECK(stats.allocated_bytes.current == stats.requested_bytes.current);
  CHECK(stats.category(MemoryCategory::Parameter).current == 1000);
  CHECK(stats.category(MemoryCategory::Activation).current == bytes(3 * MiB + 7));
  CHECK(allocator.block_size(first.block) == 1000);

  allocator.free(first.block);
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == bytes(3 * MiB + 7));  // back to the backend at once
  CHECK(stats.num_backend_frees == 1);
  CHECK(stats.inactive_split_bytes.current == 0);

  // The same request again is a new backend allocation: nothing is cached for it.
  Allocation again = allocator.allocate(1000, MemoryCategory::Parameter);
  CHECK(allocator.stats().num_backend_allocs == 3);
  allocator.free(again.block);
  allocator.free(second.block);
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == 0);
  CHECK(stats.segment_count.current == 0);
  CHECK(stats.reserved_bytes.peak == bytes(1000 + 3 * MiB + 7));
}

TEST_CASE("MG_NO_MEMORY_CACHING turns caching off, except on simulated devices", "[allocator]") {
  const char* saved = std::getenv("MG_NO_MEMORY_CACHING");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("MG_NO_MEMORY_CACHING");
  CHECK(mg::caching_from_environment() == CachingAllocator::Caching::On);
  setenv("MG_NO_MEMORY_CACHING", "0", 1);
  CHECK(mg::caching_from_environment() == CachingAllocator::Caching::On);
  setenv("MG_NO_MEMORY_CACHING", "1", 1);
  CHECK(mg::caching_from_environment() == CachingAllocator::Caching::Off);
  CHECK(mg::allocator_for(Device::simulated(13)).caching() == CachingAllocator::Caching::On);
  if (saved != nullptr) {
    setenv("MG_NO_MEMORY_CACHING", restore.c_str(), 1);
  } else {
    unsetenv("MG_NO_MEMORY_CACHING");
  }
}

TEST_CASE("the registry keeps one allocator per device", "[allocator]") {
  CachingAllocator& cpu = mg::allocator_for(Device::cpu());
  CHECK(&cpu == &mg::allocator_for(Device::cpu()));
  CHECK(cpu.device() == Device::cpu());
  CHECK(cpu.backend().capacity() == 0);  // unbounded

  // simulated:N defaults to 80 GiB; set_simulated_capacity replaces it.
  CachingAllocator& simulated = mg::allocator_for(Device::simulated(11));
  CHECK(simulated.backend().capacity() == 80 * GiB);
  CHECK(&simulated == &mg::allocator_for(Device::simulated(11)));
  CHECK(&simulated != &mg::allocator_for(Device::simulated(12)));

  mg::set_simulated_capacity(11, 64 * MiB);
  CachingAllocator& resized = mg::allocator_for(Device::simulated(11));
  CHECK(resized.backend().capacity() == 64 * MiB);

  Allocation alive = resized.allocate(512, MemoryCategory::Parameter);
  CHECK_THROWS_WITH(mg::set_simulated_capacity(11, 128 * MiB),
                    Catch::Contains("still alive") && Catch::Contains("simulated:11"));
  resized.free(alive.block);
  mg::set_simulated_capacity(11, 128 * MiB);
  CHECK(mg::allocator_for(Device::simulated(11)).backend().capacity() == 128 * MiB);

  CHECK_THROWS_AS(mg::set_simulated_capacity(11, 0), mg::Error);
  CHECK_THROWS_AS(mg::allocator_for(Device{mg::DeviceType::CPU, 1}), mg::Error);
  CHECK_THROWS_AS(mg::allocator_for(Device::simulated(-1)), mg::Error);
}

#ifndef MG_WITH_CUDA

TEST_CASE("a CUDA device without a CUDA backend is a clear error", "[allocator]") {
  CHECK_THROWS_WITH(mg::allocator_for(Device::cuda()),
                    Catch::Contains("built without CUDA support") &&
                        Catch::Contains("-DMG_WITH_CUDA=ON") &&
                        Catch::Contains("--device cpu"));
  CHECK_THROWS_AS(mg::allocator_for(Device::cuda()), mg::Error);
}
#endif
