// distributed/init_process_group.h — joining the job's process group at start-up.
//
//   mpirun -np 4 ./train            # 4 processes; in each:
//   auto group = mg::distributed::init_process_group();
//   group->rank(), group->size()    // 0..3, 4
//
// Ranks come from MPI (the MPI backend, on CPU tensors): rank and size of MPI_COMM_WORLD,
// the local rank from OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun sets it), else from
// the ranks that share this machine's memory (MPI_Comm_split_type). Started without
// mpirun, a program is a group of one. In a build without MPI (MG_WITH_MPI off) it throws
// an mg::Error saying how to build with it (distributed/without_mpi.cpp; with MPI, it is
// defined in distributed/mpi_process_group.cpp).
#pragma once

#include <chrono>
#include <memory>

#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

struct ProcessGroupOptions {
  // How long one collective may take before it ends with an mg::Error (ProcessGroup::timeout).
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
};

// The group of every process of the job. May be called more than once (each call gives a
// group of its own: their collectives do not mix); MPI is initialised by the first call
// and finalised when the process ends.
std::shared_ptr<ProcessGroup> init_process_group(const ProcessGroupOptions& options = {});

}  // namespace mg::distributed
