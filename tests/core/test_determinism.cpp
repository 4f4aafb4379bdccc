// tests/core/test_determinism.cpp — the process-wide switch of deterministic algorithms
// (core/determinism.h): off by default, and in a CUDA build it implies cuDNN's.
#include <catch2/catch.hpp>

#include "memgrad/core/determinism.h"
#ifdef MG_WITH_CUDA
#include "memgrad/cuda/cudnn/settings.h"
#endif

TEST_CASE("deterministic algorithms are off by default and switch on and off", "[core][determinism]") {
  CHECK_FALSE(mg::deterministic_algorithms());
  mg::set_deterministic_algorithms(true);
  CHECK(mg::deterministic_algorithms());
#ifdef MG_WITH_CUDA
  CHECK(mg::cuda::cudnn_deterministic());  // as torch.use_deterministic_algorithms
#endif
  mg::set_deterministic_algorithms(false);
  CHECK_FALSE(mg::deterministic_algorithms());
#ifdef MG_WITH_CUDA
  CHECK_FALSE(mg::cuda::cudnn_deterministic());
#endif
}
