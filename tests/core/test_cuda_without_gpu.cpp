// tests/core/test_cuda_without_gpu.cpp — cuda/cuda.h and CapturedStep answer in every
// build: a build without CUDA (and a machine without a GPU) says there is no device
// instead of failing to link or crashing, so one program runs with either build. (The
// CUDA build's answers on a GPU are tested in tests/cuda/.)
#include <catch2/catch.hpp>

#include "memgrad/core/error.h"
#include "memgrad/cuda/captured_step.h"
#include "memgrad/cuda/cuda.h"

TEST_CASE("cuda::is_available() agrees with device_count() in every build", "[cuda-api]") {
  CHECK(mg::cuda::is_available() == (mg::cuda::device_count() > 0));
  CHECK(mg::cuda::device_count() >= 0);
}

#ifndef MG_WITH_CUDA
TEST_CASE("a build without CUDA has no devices and says why when asked to wait for one", "[cuda-api]") {
  CHECK(mg::cuda::device_count() == 0);
  CHECK_FALSE(mg::cuda::is_available());
  CHECK_THROWS_AS(mg::cuda::synchronize(), mg::Error);
  CHECK_THROWS_WITH(mg::cuda::synchronize(), Catch::Contains("built without CUDA") &&
                                                 Catch::Contains("-DMG_WITH_CUDA=ON"));
  const bool before = mg::cuda::allow_tf32();
  mg::cuda::set_allow_tf32(!before);
  CHECK(mg::cuda::allow_tf32() == !before);
  mg::cuda::set_allow_tf32(before);
}
#endif

TEST_CASE("CapturedStep refuses a CPU device, and a build without CUDA says why", "[cuda-api]") {
  // Either build names the class and the device it was given.
  CHECK_THROWS_WITH(mg::cuda::CapturedStep([] {}, {.device = mg::Device::cpu()}),
                    Catch::Contains("CapturedStep") && Catch::Contains("cpu") && Catch::Contains("CUDA"));
#ifndef MG_WITH_CUDA
  CHECK_THROWS_WITH(mg::cuda::CapturedStep([] {}), Catch::Contains("built without CUDA") &&
                                                       Catch::Contains("run the step eagerly"));
#endif
}
