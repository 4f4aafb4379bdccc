// distributed/mpi_runtime.cpp — MPI initialised once, finalised (or, after a lost
// collective, aborted) at the process's end. See mpi_runtime.h for why the abort.
#include "memgrad/distributed/mpi_runtime.h"

#include <mpi.h>

#include <cstdio>

#include "memgrad/core/error.h"

namespace mg::distributed::mpi {
namespace {

// One per process, created by the first ensure_initialized(); its destructor runs at
// the process's end (after those of statics created later, such as a program's group).
class MpiRuntime {
 public:
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;  // the program's own MPI_Init: the program finalises too
    int provided = 0;
    const int status = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MG_CHECK(status == MPI_SUCCESS, "init_process_group: MPI_Init_thread failed (error ", status,
             "). Hint: start the program with mpirun -np N, or check the MPI installation "
             "(libopenmpi-dev, openmpi-bin).");
    owns_mpi_ = true;
  }

  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (!lost_collective().empty()) {
      std::fprintf(stderr,
                   "memgrad: %s\nmemgrad: ending every rank (MPI_Abort): finalising would wait "
                   "for the ranks that never joined it.\n",
                   lost_collective().c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (owns_mpi_) MPI_Finalize();
  }

  std::mutex& mutex() { return mpi_mutex_; }

  // Keeps the first description: later losses usually follow from it.
  void note_lost_collective(const std::string& description) {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (lost_collective_.empty()) lost_collective_ = description;
  }

  std::string lost_collective() {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    return lost_collective_;
  }

 private:
  std::mutex mpi_mutex_;
  // NOTE: its own mutex, not mpi_mutex_: a group notes a loss while it holds mpi_mutex_.
  std::mutex lost_mutex_;
  std::string lost_collective_;
  bool owns_mpi_ = false;
};

MpiRuntime& runtime() {
  static MpiRuntime instance;
  return instance;
}

}  // namespace

void ensure_initialized() { runtime(); }

std::mutex& mutex() { return runtime().mutex(); }

void note_lost_collective(const std::string& description) {
  runtime().note_lost_collective(description);
}

}  // namespace mg::distributed::mpi
