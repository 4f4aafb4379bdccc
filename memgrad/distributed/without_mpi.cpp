// distributed/without_mpi.cpp — the MPI backend's maker in a build without MPI: the program
// builds either way, and init_process_group() says how to get the backend when it is asked for.
#include "memgrad/core/error.h"
#include "memgrad/distributed/process_group_backends.h"

namespace mg::distributed {

std::shared_ptr<ProcessGroup> make_mpi_process_group(std::chrono::milliseconds) {
  mg::detail::throw_error(
      "init_process_group: this memgrad was built without MPI (MG_WITH_MPI is off), so it has "
      "no process group backend. Hint: install libopenmpi-dev and openmpi-bin "
      "(scripts/install-deps), then configure again with -DMG_WITH_MPI=ON.");
}

}  // namespace mg::distributed
