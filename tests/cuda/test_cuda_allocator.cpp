// tests/cuda/test_cuda_allocator.cpp — the caching allocator on cudaMalloc: statistics,
// empty_cache, the memory fraction and out-of-memory, memory categories, and stream-aware
// reuse with record_stream, on a real GPU.
//
// Tests that count segments allocate on a fresh stream: blocks are reused only on their
// own stream, so what earlier tests left cached cannot serve them and the numbers are
// exact.
#include <catch2/catch.hpp>

#include <atomic>
#include <optional>
#include <thread>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/cuda_allocator_backend.h"
#include "memgrad/cuda/nvml.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/stream_hold.h"
#include "memgrad/cuda/transfer.h"

namespace {

using mg_test::StreamHold;

using mg::Device;
using mg::DType;
using mg::MemoryCategory;
using mg::Tensor;

constexpr int64_t MiB = int64_t{1} << 20;

mg::CachingAllocator& cuda_allocator() { return mg::allocator_for(Device::cuda()); }

// Restores the memory fraction of cuda:0 however the test ends.
struct FractionRestorer {
  ~FractionRestorer() { mg::cuda::set_memory_fraction(1.0, Device::cuda()); }
};

}  // namespace

TEST_CASE("a CUDA tensor's bytes: 512-byte rounding, a 2 MiB segment, empty_cache",
          "[cuda]") {
  mg::CachingAllocator& allocator = cuda_allocator();
  allocator.empty_cache();
  mg::cuda::Stream stream;
  mg::cuda::StreamGuard use(stream);
  const mg::MemoryStats before = allocator.stats();
  {
    // 1000 floats = 4000 bytes, rounded up to 4096; the first block on this stream needs a
    // new small-pool segment of 2 MiB.
    Tensor tensor = mg::empty({1000}, {.device = Device::cuda()});
    mg::MemoryStats stats = allocator.stats();
    CHECK(stats.allocated_bytes.current - before.allocated_bytes.current == 4096);
    CHECK(stats.requested_bytes.current - before.requested_bytes.current == 4000);
    CHECK(stats.reserved_bytes.current - before.reserved_bytes.current == 2 * MiB);
    CHECK(stats.segment_count.current - before.segment_count.current == 1);
    CHECK(stats.num_backend_allocs - before.num_backend_allocs == 1);

    // A second small tensor on the stream shares the segment.
    Tensor second = mg::empty({10}, {.dtype = DType::Float64, .device = Device::cuda()});
    stats = allocator.stats();
    CHECK(stats.allocated_bytes.current - before.allocated_bytes.current == 4096 + 512);
    CHECK(stats.reserved_bytes.current - before.reserved_bytes.current == 2 * MiB);
  }
  // Freed: cached, still reserved.
  mg::MemoryStats stats = allocator.stats();
  CHECK(stats.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(stats.reserved_bytes.current - before.reserved_bytes.current == 2 * MiB);
  // empty_cache gives the segment back to CUDA.
  allocator.empty_cache();
  stats = allocator.stats();
  CHECK(stats.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(stats.num_backend_frees - before.num_backend_frees == 1);
}

// [device-wide]: these read NVML's count of the whole device's used bytes, which other test
// processes on the GPU change; tests/CMakeLists.txt runs them alone (RUN_SERIAL).
TEST_CASE("the CUDA backend describes the device's memory", "[cuda][device-wide]") {
  const std::string description = cuda_allocator().backend().describe_memory();
  CHECK_THAT(description, Catch::StartsWith("cuda:0: ") && Catch::Contains(" free of ") &&
                              Catch::Contains("(cudaMemGetInfo)"));
  // NVML's view, or a plain statement that there is none.
  CHECK_THAT(description, Catch::EndsWith("; " + mg::cuda::describe_nvml_memory(0)));
  size_t free_bytes = 0, total_bytes = 0;
  MG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  CHECK(cuda_allocator().backend().capacity() == total_bytes);  // fraction 1
  CHECK(cuda_allocator().backend().has_storage());
  CHECK_FALSE(cuda_allocator().backend().is_pinned());
  // memory_summary shows the same line.
  CHECK_THAT(cuda_allocator().memory_summary(), Catch::Contains("(cudaMemGetInfo)") && Catch::Contains("NVML"));
}

TEST_CASE("NVML, loaded at run time, sees the device's memory including memgrad's", "[cuda][device-wide]") {
  cuda_allocator().empty_cache();  // so the tensor below needs a fresh cudaMalloc
  std::optional<mg::cuda::NvmlMemory> before = mg::cuda::nvml_memory(0);
  if (!before) {
    // A driver without libnvidia-ml.so.1 (or an NVML that does not know the device).
    CHECK(mg::cuda::describe_nvml_memory(0) == "NVML unavailable");
    return;
  }
  size_t free_bytes = 0, total_bytes = 0;
  MG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // NVML counts the whole frame buffer; CUDA's total leaves out what the driver reserves.
  CHECK(before->total_bytes >= total_bytes);
  CHECK(static_cast<double>(before->total_bytes) < 1.1 * static_cast<double>(total_bytes));
  CHECK(before->used_bytes <= before->total_bytes);
  // 256 MiB more in use: cudaMalloc'ed by a fresh segment, so NVML's used grows by about
  // that much (other processes may allocate too, so only a lower bound holds).
  Tensor held = mg::empty({64 * MiB}, {.device = Device::cuda()});
  std::optional<mg::cuda::NvmlMemory> after = mg::cuda::nvml_memory(0);
  REQUIRE(after);
  CHECK(after->used_bytes >= before->used_bytes + static_cast<uint64_t>(200 * MiB));
  CHECK_THAT(mg::cuda::describe_nvml_memory(0), Catch::StartsWith("NVML: ") && Catch::Contains(" used of "));
}

TEST_CASE("beyond the memory fraction an allocation is an OutOfMemoryError", "[cuda]") {
  FractionRestorer restore;
  CHECK_THROWS_WITH(mg::cuda::set_memory_fraction(0.0), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(mg::cuda::set_memory_fraction(1.5), Catch::Contains("(0, 1]"));
  CHECK_THROWS_AS(mg::cuda::set_memory_fraction(0.5, Device::cpu()), mg::Error);

  mg::CachingAllocator& allocator = cuda_allocator();
  allocator.empty_cache();  // what earlier tests left cached would count against the fraction
  auto& backend = dynamic_cast<mg::cuda::CudaAllocatorBackend&>(allocator.backend());
  // Room for 64 MiB beyond what live tensors of earlier tests still hold (cuBLAS keeps its
  // workspaces); the request wants 256 MiB.
  const size_t room = backend.used_bytes() + static_cast<size_t>(64 * MiB);
  const double fraction = static_cast<double>(room) / static_cast<double>(backend.total_bytes());
  mg::cuda::set_memory_fraction(fraction);
  CHECK(mg::cuda::memory_fraction() == fraction);
  CHECK(backend.capacity() <= room);

  Tensor parameter = mg::empty({1000}, {.device = Device::cuda(), .category = MemoryCategory::Parameter});
  const int64_t ooms_before = allocator.stats().num_ooms;
  const int64_t request = 256 * MiB;
  std::string message;
  try {
    Tensor too_big = mg::empty({request / 4}, {.device = Device::cuda()});
    FAIL("expected mg::OutOfMemoryError");
  } catch (const mg::OutOfMemoryError& error) {
    message = error.what();
  }
  CHECK_THAT(message, Catch::Contains("cuda:0 out of memory") &&
                          Catch::Contains("256.00 MiB (268435456 bytes)") &&
                          Catch::Contains("Requested bytes by category") &&
                          Catch::Contains("PARAMETER") &&
                          Catch::Contains("set_memory_fraction") &&
                          Catch::Contains("(cudaMemGetInfo)"));
  CHECK(allocator.stats().num_ooms == ooms_before + 1);
  CHECK(mg::memory::snapshot(Device::cuda()).num_ooms == ooms_before + 1);

  // Within the fraction allocations still work, and after restoring it large ones too.
  Tensor small = mg::empty({1024}, {.device = Device::cuda()});
  mg::cuda::set_memory_fraction(1.0);
  Tensor large = mg::empty({request / 4}, {.device = Device::cuda()});
  CHECK(large.nbytes() == static_cast<size_t>(request));
}

TEST_CASE("CUDA tensors from factories are TEMPORARY and can be re-tagged", "[cuda]") {
  const mg::memory::Snapshot before = mg::memory::snapshot(Device::cuda());
  CHECK(before.device == Device::cuda());
  Tensor tensor = mg::empty({1000}, {.device = Device::cuda()});
  CHECK(tensor.memory_category() == MemoryCategory::Temporary);
  mg::memory::Snapshot after = mg::memory::snapshot(Device::cuda());
  CHECK(after.category(MemoryCategory::Temporary).current -
            before.category(MemoryCategory::Temporary).current == 4000);
  CHECK(after.allocated_bytes - before.allocated_bytes == 4096);

  tensor.set_memory_category(MemoryCategory::Parameter);
  CHECK(tensor.memory_category() == MemoryCategory::Parameter);
  after = mg::memory::snapshot(Device::cuda());
  CHECK(after.category(MemoryCategory::Temporary).current ==
        before.category(MemoryCategory::Temporary).current);
  CHECK(after.category(MemoryCategory::Parameter).current -
            before.category(MemoryCategory::Parameter).current == 4000);

  Tensor optimizer_state = mg::empty({10}, {.device = Device::cuda(),
                                            .category = MemoryCategory::OptimizerState});
  CHECK(optimizer_state.memory_category() == MemoryCategory::OptimizerState);
  CHECK_THAT(mg::memory::report(Device::cuda()), Catch::Contains("cuda:0"));
}

TEST_CASE("a block is reused only on the stream it was allocated on", "[cuda]") {
  // A new stream's handle may repeat a destroyed one's, whose cached blocks would compete.
  cuda_allocator().empty_cache();
  mg::cuda::Stream side;
  void* side_address = nullptr;
  {
    mg::cuda::StreamGuard use(side);
    Tensor on_side = mg::empty({1000}, {.device = Device::cuda()});
    side_address = on_side.raw_data();
  }
  // The side stream's block is cached for the side stream only.
  Tensor on_default = mg::empty({1000}, {.device = Device::cuda()});
  CHECK(on_default.raw_data() != side_address);
  mg::cuda::StreamGuard use(side);
  Tensor again_on_side = mg::empty({1000}, {.device = Device::cuda()});
  CHECK(again_on_side.raw_data() == side_address);
}

TEST_CASE("a record_stream'd tensor is not reused before the side stream's work is done",
          "[cuda]") {
  mg::CachingAllocator& allocator = cuda_allocator();
  allocator.empty_cache();
  mg::cuda::Stream side;
  // 1 MiB on the default stream, from a fresh 2 MiB segment (made before the side stream is
  // held: nothing below needs cudaMalloc).
  Tensor used = mg::empty({MiB / 4}, {.device = Device::cuda()});
  void* const used_address = used.raw_data();
  {
    StreamHold hold(side);
    // Work on the side stream uses the tensor; it cannot run before the hold is released.
    MG_CUDA_CHECK(cudaMemsetAsync(used.raw_data(), 0x3f, static_cast<size_t>(MiB), side.handle()));
    mg::cuda::record_stream(used, side);
    used = Tensor();

    // Freed, but the side stream may still write into it: active, not allocated.
    mg::MemoryStats stats = allocator.stats();
    CHECK(stats.active_bytes.current - stats.allocated_bytes.current == MiB);
    CHECK(stats.active_count.current - stats.allocation_count.current == 1);
    Tensor next = mg::empty({MiB / 4}, {.device = Device::cuda()});
    CHECK(next.raw_data() != used_address);  // the rest of the segment instead
    hold.release();
  }
  side.synchronize();
  // The side stream's work is done: the next allocation finishes the free and reuses it.
  Tensor reused = mg::empty({MiB / 4}, {.device = Device::cuda()});
  CHECK(reused.raw_data() == used_address);
  const mg::MemoryStats stats = allocator.stats();
  CHECK(stats.active_bytes.current == stats.allocated_bytes.current);
  CHECK(stats.active_count.current == stats.allocation_count.current);
}

TEST_CASE("empty_cache waits for blocks other streams still use", "[cuda]") {
  mg::CachingAllocator& allocator = cuda_allocator();
  mg::cuda::Stream side;
  Tensor used = mg::empty({4 * MiB}, {.device = Device::cuda()});  // 16 MiB
  mg::cuda::record_stream(used, side);
  MG_CUDA_CHECK(cudaMemsetAsync(used.raw_data(), 0, used.nbytes(), side.handle()));
  used = Tensor();
  allocator.empty_cache();  // synchronises the side stream's event, then frees
  const mg::MemoryStats stats = allocator.stats();
  CHECK(stats.active_bytes.current == stats.allocated_bytes.current);
}
