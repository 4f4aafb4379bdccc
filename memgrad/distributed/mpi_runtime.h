// distributed/mpi_runtime.h — MPI's lifetime in a memgrad process: initialised once by the
// first process group, finalised when the process ends; and what ends the job when a
// collective was lost. (Declared without <mpi.h>, so this header needs no MPI to compile.)
//
// NOTE: why the job ends with MPI_Abort after a lost collective. The rank that sees the
// timeout gets a clean mg::Error and can report it; but when the process then ends,
// MPI_Finalize would wait for the ranks that are stuck or gone, which is the hang the
// timeout exists to avoid. So memgrad calls MPI_Abort at exit instead, once a collective
// has been lost: mpirun then ends every rank, and the job fails rather than hangs. This is
// the one place the library ends a process, and only as the process is ending anyway.
#pragma once

#include <mutex>
#include <string>

namespace mg::distributed::mpi {

// Initialises MPI (MPI_THREAD_SERIALIZED) unless the program already has; registers the
// finalisation at exit (only when memgrad initialised it). Safe to call from any thread.
void ensure_initialized();

// Held around every MPI call memgrad makes: MPI is initialised for serialised calls, and a
// Work may be waited for on another thread than the one that started it.
std::mutex& mutex();

// A collective did not complete in time: at exit, memgrad ends every rank (MPI_Abort) with
// `description` printed, rather than finalising. May be called with mpi::mutex() held.
void note_lost_collective(const std::string& description);

}  // namespace mg::distributed::mpi
