// tests/distributed/mpi/test_dead_rank.cpp — a rank killed mid-step (SIGKILL, as the
// out-of-memory killer or a lost node ends a process) must not leave the others hanging:
// the job ends within the group's timeout, and what ends it names the dead rank. Run with
// 2 ranks, on its own (ctest's "[dead_rank]" entry), judged by the job's output.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "memgrad/core/factory.h"
#include "memgrad/distributed/init_process_group.h"

TEST_CASE("A rank killed in the middle of a step ends the job instead of hanging it", "[dead_rank]") {
  using namespace std::chrono_literals;
  auto group = mg::distributed::init_process_group({.timeout = 20s});
  REQUIRE(group->size() == 2);
  mg::Tensor tensor = mg::ones({1024});
  group->all_reduce(tensor)->wait();  // a step both ranks finish
  if (group->rank() == 1) {
    std::cout << "rank 1 of 2: killing itself in the middle of the next step" << std::endl;
    ::kill(::getpid(), SIGKILL);
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    group->all_reduce(tensor)->wait();  // rank 1 never comes
  } catch (const std::exception& error) {
    std::cout << "rank 0 of 2: " << error.what() << " (after "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s)" << std::endl;
    throw;
  }
}
