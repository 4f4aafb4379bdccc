// tests/autocast/test_autocast_state.cpp — the autocast room alone, without any op: the
// guard's per-thread state, nesting and errors, the cast policy's dtype for each family,
// and the weight-cast cache's storage (valid while the parameter is unchanged, tagged
// AUTOCAST_CACHE, freed by the outermost guard's exit). Autocast through the ops:
// tests/amp/test_autocast.cpp.
#include <catch2/catch.hpp>

#include <optional>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autocast/cast_policy.h"
#include "memgrad/autocast/weight_cast_cache.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"

using namespace mg;
using amp::AutocastGuard;
using amp::CastPolicy;

namespace {

int64_t cpu_bytes(MemoryCategory category) { return memory::snapshot(Device::cpu()).category(category).current; }

}  // namespace

TEST_CASE("AutocastGuard enables one device type per thread and nesting restores it", "[autocast]") {
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
  CHECK(amp::autocast_dtype(DeviceType::CPU) == DType::BFloat16);
  CHECK(amp::autocast_dtype(DeviceType::CUDA) == DType::Float16);
  {
    AutocastGuard outer(DType::BFloat16, DeviceType::CPU);
    CHECK(amp::is_autocast_enabled(DeviceType::CPU));
    CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
    {
      AutocastGuard inner(DType::Float16, DeviceType::CPU);
      CHECK(amp::autocast_dtype(DeviceType::CPU) == DType::Float16);
      {
        AutocastGuard off(DType::Float16, DeviceType::CPU, /*enabled=*/false);
        CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
      }
      CHECK(amp::is_autocast_enabled(DeviceType::CPU));
    }
    CHECK(amp::autocast_dtype(DeviceType::CPU) == DType::BFloat16);
    CHECK(amp::is_autocast_enabled(DeviceType::CPU));
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
}

TEST_CASE("AutocastGuard refuses dtypes other than float16 and bfloat16", "[autocast]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    INFO(dtype);
    CHECK_THROWS_WITH(AutocastGuard(dtype, DeviceType::CPU),
                      Catch::Contains("float16 or bfloat16") && Catch::Contains(dtype_name(dtype)));
  }
  // A refused guard leaves the state as it was.
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
}

TEST_CASE("AutocastGuard autocasts on the simulated device, for memory predictions", "[autocast]") {
  {
    const AutocastGuard guard(DType::Float16, DeviceType::Simulated);
    CHECK(amp::is_autocast_enabled(DeviceType::Simulated));
    CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
    CHECK(amp::autocast_dtype(DeviceType::Simulated) == DType::Float16);
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::Simulated));
}

TEST_CASE("the cast policy sends products to the autocast dtype and the rest to float32, where autocast is on",
          "[autocast]") {
  const Tensor x32 = zeros({2, 3}), x16 = zeros({2, 3}, {.dtype = DType::Float16});
  const Tensor x64 = zeros({2, 3}, {.dtype = DType::Float64}), indices = zeros({2}, {.dtype = DType::Int64});
  // Off: every operand keeps its dtype.
  CHECK(amp::autocast_cast_dtype(x32, CastPolicy::LowerPrecision) == std::nullopt);
  CHECK(amp::autocast_cast_dtype(x16, CastPolicy::Float32) == std::nullopt);
  {
    const AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    CHECK(amp::autocast_cast_dtype(x32, CastPolicy::LowerPrecision) == DType::BFloat16);
    CHECK(amp::autocast_cast_dtype(x16, CastPolicy::LowerPrecision) == DType::BFloat16);
    CHECK(amp::autocast_cast_dtype(x16, CastPolicy::Float32) == DType::Float32);
    // Already in the policy's dtype, not eligible, or undefined: left as it is.
    CHECK(amp::autocast_cast_dtype(x32, CastPolicy::Float32) == std::nullopt);
    CHECK(amp::autocast_cast_dtype(x64, CastPolicy::LowerPrecision) == std::nullopt);
    CHECK(amp::autocast_cast_dtype(x64, CastPolicy::Float32) == std::nullopt);
    CHECK(amp::autocast_cast_dtype(indices, CastPolicy::Float32) == std::nullopt);
    CHECK(amp::autocast_cast_dtype(Tensor(), CastPolicy::LowerPrecision) == std::nullopt);
  }
  // On for another device type only: CPU tensors keep their dtypes.
  const AutocastGuard cuda_only(DType::Float16, DeviceType::CUDA);
  CHECK(amp::autocast_cast_dtype(x32, CastPolicy::LowerPrecision) == std::nullopt);
}

TEST_CASE("the weight-cast cache keeps a parameter's copy while it is unchanged, until the outermost guard exits",
          "[autocast]") {
  const Tensor weight = zeros({4, 8}, {.requires_grad = true});
  const Tensor activation = zeros({4, 8});
  CHECK(amp::detail::is_weight_cast_cacheable(weight));
  CHECK_FALSE(amp::detail::is_weight_cast_cacheable(activation));
  CHECK_FALSE(amp::detail::is_weight_cast_cacheable(zeros({4, 8}, {.dtype = DType::Float16, .requires_grad = true})));

  const int64_t cache_bytes_before = cpu_bytes(MemoryCategory::AutocastCache);
  {
    const AutocastGuard outer(DType::BFloat16, DeviceType::CPU);
    {
      const AutocastGuard inner(DType::BFloat16, DeviceType::CPU);
      const Tensor copy = zeros({4, 8}, {.dtype = DType::BFloat16});
      amp::detail::keep_weight_cast(weight, copy, /*has_history=*/true);
      CHECK(copy.memory_category() == MemoryCategory::AutocastCache);
      CHECK(cpu_bytes(MemoryCategory::AutocastCache) - cache_bytes_before == 4 * 8 * 2);  // one bfloat16 copy
    }
    // The inner guard's exit keeps it: the copy is the outermost region's.
    CHECK(amp::autocast_cache_size() == 1);
    const Tensor found = amp::detail::find_weight_cast(weight, DType::BFloat16, /*has_history=*/true);
    REQUIRE(found.defined());
    CHECK(found.dtype() == DType::BFloat16);
    // Another dtype, or a copy made without a graph for a caller that records one: a miss.
    CHECK_FALSE(amp::detail::find_weight_cast(weight, DType::Float16, true).defined());
    CHECK_FALSE(amp::detail::find_weight_cast(weight, DType::BFloat16, /*has_history=*/false).defined());
    // An in-place update (an optimizer step) bumps the version: the copy is stale.
    weight.bump_version();
    CHECK_FALSE(amp::detail::find_weight_cast(weight, DType::BFloat16, true).defined());
  }
  CHECK(amp::autocast_cache_size() == 0);
  CHECK(cpu_bytes(MemoryCategory::AutocastCache) == cache_bytes_before);
}
