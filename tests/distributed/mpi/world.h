// tests/distributed/mpi/world.h — the process group the MPI tests share: every rank runs
// the same test cases in the same order (one Catch2 program under mpirun), so each
// collective a test starts is joined by the same test on every other rank.
#pragma once

#include <memory>

#include "memgrad/distributed/init_process_group.h"

namespace mg_test {

inline mg::distributed::ProcessGroup& world() {
  static const std::shared_ptr<mg::distributed::ProcessGroup> group =
      mg::distributed::init_process_group();
  return *group;
}

}  // namespace mg_test
