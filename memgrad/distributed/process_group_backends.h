// distributed/process_group_backends.h — how init_process_group (init_process_group.cpp)
// builds each backend's group. Internal to distributed/: programs call init_process_group.
//
// Each maker is defined by its backend's file when the backend is built
// (mpi_process_group.cpp, nccl_process_group.cpp) and otherwise by a file that says how to
// build with it (without_mpi.cpp, without_nccl.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/launch_environment.h"
#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

// A group over MPI_COMM_WORLD (a communicator of its own), on CPU tensors.
std::shared_ptr<ProcessGroup> make_mpi_process_group(std::chrono::milliseconds timeout);

// Hands rank 0's bytes to every rank and returns them (every rank passes as many bytes;
// only rank 0's content counts): MPI_Bcast under mpirun, TCP otherwise.
using ShareFromRank0 = std::function<std::vector<std::byte>(const std::vector<std::byte>&)>;
// Told (once) the description of a collective that was lost; may be empty.
using LostCollectiveHandler = std::function<void(const std::string&)>;

// A group over NCCL on this rank's GPU (options.device, else cuda:<local rank % GPUs>).
std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options,
                                                      const LaunchEnvironment& launch,
                                                      const ShareFromRank0& share_from_rank0,
                                                      LostCollectiveHandler on_lost_collective);

}  // namespace mg::distributed
