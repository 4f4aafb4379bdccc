// tests/distributed/test_init_process_group.cpp — what init_process_group refuses before it
// starts any backend: a backend this build lacks (NCCL without CUDA or NCCL), a device
// the backend does not carry, an MPI group asked for by torchrun-style variables, launch
// variables that are malformed, a timeout that is not positive. (Runs without mpirun; the
// groups themselves are tested under mpirun in tests/distributed/mpi/ and on a GPU in
// tests/cuda/test_cuda_nccl_process_group.cpp.)
#include <catch2/catch.hpp>

#include <chrono>

#include "distributed/scoped_environment.h"
#include "memgrad/core/error.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/nccl_process_group.h"

using Catch::Matchers::Contains;
using mg::distributed::Backend;
using mg::distributed::init_process_group;

#if !defined(MG_WITH_NCCL)
TEST_CASE("NCCL asked for in a build without it says how to build with it", "[distributed]") {
  CHECK(mg::distributed::nccl_version() == 0);
#if defined(MG_WITH_CUDA)
  const auto reason = Contains("built without NCCL (MG_WITH_NCCL is off") && Contains("-DMG_WITH_NCCL=ON");
#else
  const auto reason = Contains("built without CUDA (MG_WITH_CUDA is off)");
#endif
  CHECK_THROWS_WITH(init_process_group({.backend = Backend::Nccl}),
                    Contains("the NCCL backend was asked for") && reason && Contains("Backend::Mpi"));
  // Backend::Auto picks NCCL for a CUDA device.
  CHECK_THROWS_WITH(init_process_group({.device = mg::Device::cuda()}),
                    Contains("the NCCL backend was asked for"));
}
#endif

TEST_CASE("The MPI backend refuses a CUDA device", "[distributed]") {
  CHECK_THROWS_WITH(init_process_group({.backend = Backend::Mpi, .device = mg::Device::cuda(1)}),
                    Contains("the MPI backend carries CPU tensors, not tensors on cuda:1") &&
                        Contains("Backend::Nccl"));
}

TEST_CASE("The MPI backend refuses a world that torchrun-style variables started", "[distributed]") {
  const mg_test::ScopedEnvironment launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  CHECK_THROWS_WITH(init_process_group(), Contains("the MPI backend starts its ranks through mpirun") &&
                                              Contains("(RANK=1, WORLD_SIZE=2)") &&
                                              Contains("mpirun -np 2"));
}

TEST_CASE("init_process_group refuses malformed launch variables", "[distributed]") {
  const mg_test::ScopedEnvironment launch({{"RANK", "zero"}, {"WORLD_SIZE", "2"}});
  CHECK_THROWS_WITH(init_process_group({.backend = Backend::Nccl}),
                    Contains("RANK=\"zero\" is not an integer"));
}

TEST_CASE("init_process_group refuses a timeout that is not positive", "[distributed]") {
  CHECK_THROWS_WITH(init_process_group({.timeout = std::chrono::milliseconds(0)}),
                    Contains("the timeout must be positive, got 0 ms"));
}
