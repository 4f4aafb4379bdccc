// tests/distributed/mpi/test_timeout.cpp — a collective that one rank never joins ends on
// the others with an mg::Error once the timeout has passed, instead of hanging; the group
// then refuses every further collective. Run with 2 ranks, on its own (ctest's "[timeout]"
// entry): when the process ends, memgrad ends the job with MPI_Abort (mpi_runtime.h), so
// ctest judges the run by the line rank 0 prints after its checks passed.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/distributed/init_process_group.h"

using Catch::Matchers::Contains;

TEST_CASE("A collective that rank 1 skips ends on rank 0 with a timeout error", "[timeout]") {
  using namespace std::chrono_literals;
  auto group = mg::distributed::init_process_group({.timeout = 2s});
  REQUIRE(group->size() == 2);
  REQUIRE(group->timeout() == 2s);
  if (group->rank() == 1) return;  // never joins the all_reduce

  mg::Tensor tensor = mg::ones({4});
  const auto start = std::chrono::steady_clock::now();
  const auto work = group->all_reduce(tensor);
  REQUIRE_THROWS_WITH(work->wait(),
                    Contains("all_reduce (sum) of a float32 tensor of shape [4] on cpu on rank 0 "
                             "of 2 did not complete within 2 s") &&
                        Contains("another rank has not joined it"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(seconds >= 2.0);
  REQUIRE(seconds < 10.0);
  // The group is unusable from now on, and says why.
  REQUIRE_THROWS_WITH(group->barrier(), Contains("did not complete within 2 s") &&
                                          Contains("can no longer be used"));
  REQUIRE_THROWS_WITH(work->is_completed(), Contains("can no longer be used"));
  // Reached only when every REQUIRE above held.
  std::cout << "rank 0 of 2: the all_reduce rank 1 skipped ended with a timeout error after "
            << seconds << " s" << std::endl;
}
