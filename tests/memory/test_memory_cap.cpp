// tests/memory/test_memory_cap.cpp — a cap on what the caching allocator may reserve: a
// request past it throws mg::OutOfMemoryError (an mg::Error) naming the cap, after the
// cached segments were given back and the request retried; a training step that ran out of
// memory is caught, its tensors freed, and training goes on with smaller steps on the same
// allocator; a cap is a positive byte count, on any device.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "memgrad/autograd/loss.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/memory_cap.h"
#include "memgrad/nn/linear.h"
#include "memgrad/optim/sgd.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Sets a cap on the CPU and lifts it when the test ends, so that no other test sees it.
class CpuCap {
 public:
  explicit CpuCap(size_t bytes) { mg::memory::set_memory_cap(mg::Device::cpu(), bytes); }
  ~CpuCap() { mg::memory::remove_memory_cap(mg::Device::cpu()); }
};

size_t cpu_reserved() {
  return static_cast<size_t>(mg::allocator_for(mg::Device::cpu()).stats().reserved_bytes.current);
}

}  // namespace

TEST_CASE("a request past the memory cap throws OutOfMemoryError naming the cap, and the allocator stays usable",
          "[memory][memory-cap]") {
  mg::CachingAllocator& allocator = mg::allocator_for(mg::Device::cpu());
  {
    mg::Tensor cached = mg::empty({8 * int64_t{MiB}}, {.dtype = mg::DType::UInt8});  // a cached segment after this
  }
  const int64_t retries_before = allocator.stats().num_alloc_retries;
  const CpuCap cap(cpu_reserved() + 4 * MiB);
  CHECK(mg::memory::memory_cap(mg::Device::cpu()) == cpu_reserved() + 4 * MiB);

  try {
    mg::empty({64 * int64_t{MiB}}, {.dtype = mg::DType::UInt8});
    FAIL("64 MiB fitted under a cap of 4 MiB more than was reserved");
  } catch (const mg::OutOfMemoryError& error) {
    CHECK_THAT(error.what(), Catch::Contains("cpu out of memory: tried to allocate 64.00 MiB") &&
                                 Catch::Contains("(the cap set with mg::memory::set_memory_cap)"));
  }
  // The cached segment went back before the retry, and the failure is an mg::Error too.
  CHECK(allocator.stats().num_alloc_retries == retries_before + 1);
  CHECK_THROWS_AS(mg::empty({64 * int64_t{MiB}}, {.dtype = mg::DType::UInt8}), mg::Error);
  // Below the cap, memory is still handed out.
  mg::Tensor small = mg::ones({1024});
  CHECK(small.sum().item<float>() == 1024.0f);
}

TEST_CASE("a training step that runs out of memory is caught, freed, and training goes on in smaller steps",
          "[memory][memory-cap]") {
  mg::Generator init(3);
  mg::nn::Linear layer(512, 512, /*bias=*/true, &init);
  mg::optim::SGD optimizer(layer.parameters(), {.lr = 0.01});
  const mg::Tensor inputs = mg::randn({4096, 512}, {}, &init);  // 8 MiB
  const mg::Tensor targets = mg::zeros({4096}, {.dtype = mg::DType::Int64});
  auto step = [&](int64_t rows) {
    optimizer.zero_grad();
    for (int64_t start = 0; start < inputs.size(0); start += rows) {
      mg::Tensor loss = mg::cross_entropy(layer(inputs.narrow(0, start, rows)), targets.narrow(0, start, rows));
      loss.backward();
    }
    optimizer.step();
  };
  step(64);  // gradients and the cached segments of a small step exist before the cap
  const CpuCap cap(cpu_reserved() + 2 * MiB);
  const size_t reserved_with_cap = cpu_reserved();

  std::optional<int64_t> rows_that_fit;
  for (int64_t rows = 4096; rows >= 64 && !rows_that_fit; rows /= 2) {
    try {
      step(rows);  // a whole-batch forward needs 8 MiB of activations at 4096 rows
      rows_that_fit = rows;
    } catch (const mg::OutOfMemoryError&) {
      // What the failed step held went out of scope with it.
      CHECK(cpu_reserved() <= reserved_with_cap + 2 * MiB);
    }
  }
  REQUIRE(rows_that_fit.has_value());
  CHECK(*rows_that_fit < 4096);
  for (int repeat = 0; repeat < 3; ++repeat) step(*rows_that_fit);  // and it keeps fitting
  CHECK(cpu_reserved() <= reserved_with_cap + 2 * MiB);
}

TEST_CASE("a memory cap must be a positive byte count, and it works on any device", "[memory][memory-cap]") {
  CHECK_THROWS_WITH(mg::memory::set_memory_cap(mg::Device::cpu(), 0), Catch::Contains("positive number of bytes"));
  CHECK_FALSE(mg::memory::memory_cap(mg::Device::cpu()).has_value());
  mg::set_simulated_capacity(0, 64 * MiB);
  mg::memory::set_memory_cap(mg::Device::simulated(0), 32 * MiB);
  CHECK(mg::memory::memory_cap(mg::Device::simulated(0)) == 32 * MiB);
  CHECK_THROWS_AS(mg::empty({40 * int64_t{MiB}}, {.dtype = mg::DType::UInt8, .device = mg::Device::simulated(0)}),
                  mg::OutOfMemoryError);
  mg::memory::remove_memory_cap(mg::Device::simulated(0));
  mg::set_simulated_capacity(0, size_t{80} << 30);  // the default again
}
