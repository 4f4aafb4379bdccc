// distributed/without_mpi.cpp — init_process_group() in a build without MPI: the program
// builds either way, and says how to get the backend when it is asked for.
#include "memgrad/core/error.h"
#include "memgrad/distributed/init_process_group.h"

namespace mg::distributed {

std::shared_ptr<ProcessGroup> init_process_group(const ProcessGroupOptions&) {
  mg::detail::throw_error(
      "init_process_group: this memgrad was built without MPI (MG_WITH_MPI is off), so it has "
      "no process group backend. Hint: install libopenmpi-dev and openmpi-bin "
      "(scripts/install-deps), then configure again with -DMG_WITH_MPI=ON.");
}

}  // namespace mg::distributed
