// distributed/launch_environment.h — which launcher started this process, and as which rank,
// read from the environment variables launchers set:
//
//   mpirun -np 4 ./train                   Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                                          OMPI_COMM_WORLD_LOCAL_RANK
//   torchrun --nproc-per-node 4 ./train    (or any launcher that sets the same variables)
//                                          RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//   ./train                                neither: a group of one
//
// Both sets may be present (a torchrun-style script started by mpirun); they must then name
// the same rank and world size. Every value is checked here, once, so a typo in a launch
// script is an mg::Error naming the variable, not a hang at the rendezvous.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mg::distributed {

enum class Launcher : uint8_t {
  None,      // no launcher's variables: a group of one
  Mpirun,    // Open MPI's mpirun (MPI can carry collectives and the NCCL id)
  Torchrun,  // RANK/WORLD_SIZE without mpirun (NCCL's id goes through MASTER_ADDR:MASTER_PORT)
};
const char* launcher_name(Launcher launcher);  // "none", "mpirun", "torchrun-style variables"

struct LaunchEnvironment {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int world_size = 1;
  // The rank among those on this machine; LOCAL_RANK (or Open MPI's) when set, else the
  // rank itself (right on one machine, the common case for a launcher that omits it).
  int local_rank = 0;
  // MASTER_ADDR and MASTER_PORT: where rank 0 listens for the rendezvous (tcp_rendezvous.h).
  // Empty and 0 when not set; only a rendezvous over TCP needs them.
  std::string master_addr;
  int master_port = 0;
};

// Returns the value of an environment variable, or nullptr when it is not set.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// Reads and checks the launcher's variables. Throws mg::Error on a variable that is not an
// integer in range, a rank outside the world, half of a pair (RANK without WORLD_SIZE), or
// mpirun's and torchrun's variables that disagree. The lookup is the process environment
// unless a test hands in its own.
LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup = {});

}  // namespace mg::distributed
