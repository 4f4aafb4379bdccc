// tests/distributed/test_without_mpi.cpp — in a build without MPI (MG_WITH_MPI off), the
// distributed room still builds, and init_process_group() says how to get a backend.
// (With MPI, tests/distributed/mpi/ runs the backend under mpirun instead.)
#include <catch2/catch.hpp>

#include "memgrad/core/error.h"
#include "memgrad/distributed/init_process_group.h"

#if !defined(MG_WITH_MPI)
TEST_CASE("init_process_group without MPI names the packages and the option to build with",
          "[distributed]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(mg::distributed::init_process_group(),
                    Contains("built without MPI (MG_WITH_MPI is off)") &&
                        Contains("install libopenmpi-dev and openmpi-bin"));
}
#endif
