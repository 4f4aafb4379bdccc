// tests/core/test_allocator_statistics.cpp — what the caching allocator reports: byte
// formatting, peaks and reset, per-category requested bytes, requested against allocated
// bytes, memory_summary, and out-of-memory (free-cache-and-retry, the error's message).
//
// As in test_caching_allocator.cpp, a simulated backend of small capacity makes every
// figure exact; the expected values are worked out in the comments.
#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/host_backend.h"
#include "core/allocator_test_support.h"
#include "memgrad/core/error.h"

using namespace allocator_test;

TEST_CASE("format_bytes picks a unit and two decimals", "[allocator]") {
  CHECK(mg::format_bytes(0) == "0 B");
  CHECK(mg::format_bytes(512) == "512 B");
  CHECK(mg::format_bytes(1023) == "1023 B");
  CHECK(mg::format_bytes(1024) == "1.00 KiB");
  CHECK(mg::format_bytes(1536) == "1.50 KiB");
  CHECK(mg::format_bytes(bytes(20 * MiB)) == "20.00 MiB");
  CHECK(mg::format_bytes(bytes(GiB + GiB / 4)) == "1.25 GiB");
  CHECK(mg::format_bytes(bytes(3 * GiB * 1024)) == "3.00 TiB");
  CHECK(mg::format_bytes(-512) == "-512 B");
  CHECK(mg::format_bytes(-bytes(2 * MiB)) == "-2.00 MiB");
}

TEST_CASE("a backend failure frees the cache and the retry succeeds", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  // Three 19 MiB requests: three unsplit 20 MiB segments, 60 of the 64 MiB.
  std::vector<Allocation> cached;
  for (int i = 0; i < 3; ++i) cached.push_back(allocator.allocate(19 * MiB, MemoryCategory::Temporary));
  for (const Allocation& allocation : cached) allocator.free(allocation.block);
  CHECK(allocator.stats().reserved_bytes.current == bytes(60 * MiB));

  // 30 MiB fits in no cached block and needs a 30 MiB segment: 60 + 30 > 64 fails, the
  // three cached segments go back, and the retry gets it.
  Allocation big = allocator.allocate(30 * MiB, MemoryCategory::Activation);
  REQUIRE(big.ptr != nullptr);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.num_alloc_retries == 1);
  CHECK(stats.num_ooms == 0);
  CHECK(stats.num_backend_frees == 3);
  CHECK(stats.num_backend_allocs == 4);
  CHECK(stats.reserved_bytes.current == bytes(30 * MiB));
  CHECK(stats.segment_count.current == 1);
  allocator.free(big.block);
}

TEST_CASE("OutOfMemoryError explains the request, the device and the categories",
          "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation parameters = allocator.allocate(10 * MiB, MemoryCategory::Parameter);  // 10 MiB seg
  Allocation saved = allocator.allocate(3 * MiB, MemoryCategory::Activation);       // 20 MiB seg

  const std::string message = oom_message(allocator, 100 * MiB, MemoryCategory::Activation);
  CHECK_THAT(message, Catch::Contains("simulated:0"));
  CHECK_THAT(message, Catch::Contains("100.00 MiB"));
  CHECK_THAT(message, Catch::Contains("104857600 bytes"));
  CHECK_THAT(message, Catch::Contains("capacity 64.00 MiB"));
  CHECK_THAT(message, Catch::Contains("PARAMETER 10.00 MiB"));
  CHECK_THAT(message, Catch::Contains("ACTIVATION 3.00 MiB"));
  CHECK_THAT(message, !Catch::Contains("GRADIENT"));  // zero categories are left out
  CHECK_THAT(message, Catch::Contains("13.00 MiB is allocated"));
  CHECK_THAT(message, Catch::Contains("30.00 MiB reserved"));
  CHECK_THAT(message, Catch::Contains("smaller batch"));
  CHECK_THAT(message, Catch::Contains("checkpointing"));
  // 17 MiB of the 30 reserved is free inside the split 20 MiB segment.
  CHECK_THAT(message, Catch::Contains("fragmentation"));
  CHECK_THAT(message, Catch::Contains("empty_cache()"));

  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.num_ooms == 1);
  CHECK(stats.num_alloc_retries == 1);
  CHECK(stats.allocated_bytes.current == bytes(13 * MiB));
  CHECK(stats.category(MemoryCategory::Activation).current == bytes(3 * MiB));

  // The allocator still works after the error.
  Allocation after = allocator.allocate(512, MemoryCategory::Temporary);
  CHECK(after.ptr != nullptr);
  for (const Allocation& allocation : {parameters, saved, after}) allocator.free(allocation.block);
}

TEST_CASE("an OOM on an empty device names no categories and no fragmentation",
          "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  const std::string message = oom_message(allocator, 65 * MiB, MemoryCategory::Parameter);
  CHECK_THAT(message, Catch::Contains("none (no live tensors)"));
  CHECK_THAT(message, !Catch::Contains("fragmentation"));
  CHECK_THAT(message, Catch::Contains("66.00 MiB"));  // the segment it needed
  CHECK(allocator.stats().num_ooms == 1);
}

TEST_CASE("peaks follow the current values until reset_peak_stats", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  // Two 1 MiB requests (small pool): the second takes the 1 MiB rest of the first segment.
  Allocation a = allocator.allocate(MiB, MemoryCategory::Temporary);
  Allocation b = allocator.allocate(MiB, MemoryCategory::Temporary);
  CHECK(allocator.stats().segment_count.current == 1);
  allocator.free(a.block);
  allocator.free(b.block);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == 0);
  CHECK(stats.allocated_bytes.peak == bytes(2 * MiB));
  CHECK(stats.allocation_count.peak == 2);

  allocator.reset_peak_stats();
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.peak == 0);
  CHECK(stats.allocation_count.peak == 0);
  CHECK(stats.reserved_bytes.peak == bytes(2 * MiB));  // the segment is still cached

  Allocation c = allocator.allocate(512, MemoryCategory::Temporary);
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.peak == 512);
  CHECK(stats.allocated_bytes.allocated == bytes(2 * MiB + 512));
  CHECK(stats.allocated_bytes.freed == bytes(2 * MiB));

  allocator.reset_accumulated_stats();
  stats = allocator.stats();
  CHECK(stats.allocated_bytes.allocated == 0);
  CHECK(stats.allocated_bytes.freed == 0);
  CHECK(stats.num_backend_allocs == 0);
  CHECK(stats.allocated_bytes.current == 512);
  CHECK(stats.allocated_bytes.peak == 512);
  allocator.free(c.block);
}

TEST_CASE("category statistics count requested bytes and move with set_category",
          "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation tensor = allocator.allocate(1000, MemoryCategory::Temporary);
  CHECK(allocator.category(tensor.block) == MemoryCategory::Temporary);
  CHECK(allocator.stats().category(MemoryCategory::Temporary).current == 1000);

  allocator.set_category(tensor.block, MemoryCategory::Activation);
  CHECK(allocator.category(tensor.block) == MemoryCategory::Activation);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.category(MemoryCategory::Temporary).current == 0);
  CHECK(stats.category(MemoryCategory::Activation).current == 1000);
  CHECK(stats.allocated_bytes.current == 1024);  // rounding is not a category's business

  allocator.free(tensor.block);
  stats = allocator.stats();
  CHECK(stats.category(MemoryCategory::Activation).current == 0);
  CHECK(stats.category(MemoryCategory::Activation).peak == 1000);
}

TEST_CASE("requested bytes are before rounding, allocated bytes after", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation a = allocator.allocate(1, MemoryCategory::Temporary);
  Allocation b = allocator.allocate(513, MemoryCategory::Temporary);
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.requested_bytes.current == 514);
  CHECK(stats.allocated_bytes.current == 512 + 1024);
  allocator.free(a.block);
  allocator.free(b.block);
  CHECK(allocator.stats().requested_bytes.current == 0);
}

TEST_CASE("memory_summary is a fixed-width table of the statistics", "[allocator]") {
  auto allocator = make_simulated(64 * MiB);
  Allocation parameters = allocator.allocate(3 * MiB, MemoryCategory::Parameter);
  const std::string summary = allocator.memory_summary();
  for (const char* row : {"simulated:0", "simulated device: capacity 64.00 MiB, used 20.00 MiB",
                          "Allocated memory", "Active memory", "Requested memory",
                          "Reserved memory", "Inactive split memory", "Allocations",
                          "Active allocs", "Segments", "Alloc retries: 0", "OOMs: 0",
                          "Current", "Peak", "Total alloc", "Total freed", "PARAMETER",
                          "WORKSPACE", "3.00 MiB", "20.00 MiB", "17.00 MiB"}) {
    CHECK_THAT(summary, Catch::Contains(row));
  }
  std::istringstream lines(summary);
  std::string line, first;
  std::getline(lines, first);
  while (std::getline(lines, line)) CHECK(line.size() == first.size());
  allocator.free(parameters.block);
}

TEST_CASE("a capped host backend runs out of real memory with OutOfMemoryError",
          "[allocator]") {
  CachingAllocator allocator(Device::cpu(), std::make_unique<mg::HostBackend>(4 * MiB));
  Allocation small = allocator.allocate(100, MemoryCategory::Temporary);  // 2 MiB segment
  // 3 MiB needs a 20 MiB segment: more than the 4 MiB cap.
  const std::string message = oom_message(allocator, 3 * MiB, MemoryCategory::Activation);
  CHECK_THAT(message, Catch::Contains("cpu"));
  CHECK_THAT(message, Catch::Contains("host memory: capacity 4.00 MiB"));
  CHECK_THAT(message, Catch::Contains("TEMPORARY 100 B"));
  CHECK(allocator.stats().num_ooms == 1);
  allocator.free(small.block);
}
