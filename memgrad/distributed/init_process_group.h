// distributed/init_process_group.h — joining the job's process group at start-up.
//
//   mpirun -np 4 ./train            # 4 processes; in each:
//   auto group = mg::distributed::init_process_group();                       // MPI, CPU tensors
//   auto group = mg::distributed::init_process_group({.backend = Backend::Nccl});  // CUDA tensors
//   group->rank(), group->size(), group->device()    // 0..3, 4, cpu or cuda:<local rank>
//
// Who is which rank comes from the launcher (distributed/launch_environment.h): mpirun
// (Open MPI's OMPI_COMM_WORLD_*), or torchrun-style variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or neither (a group of one).
//
// The backends:
//   MPI   CPU tensors. Needs mpirun for more than one rank (MPI's own start-up); its ranks
//         come from MPI_COMM_WORLD, checked against the launcher's variables. The local rank
//         is Open MPI's, else the ranks that share this machine's memory.
//   NCCL  CUDA tensors, one GPU per rank (cuda:<local rank> unless `device` names one);
//         group->device() says which: put the model there.
//         NCCL's unique id goes from rank 0 to the others over MPI under mpirun (MPI_Bcast
//         in a build with MPI), else over TCP at MASTER_ADDR:MASTER_PORT
//         (distributed/tcp_rendezvous.h: torchrun-style launches).
// Backend::Auto picks NCCL when `device` is a CUDA device, MPI otherwise (the default:
// existing callers keep the MPI group on CPU tensors).
//
// Each backend is built only where its library was found (MG_WITH_MPI, MG_WITH_NCCL);
// asking for one that was not built throws an mg::Error saying how to build with it
// (distributed/without_mpi.cpp, distributed/without_nccl.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "memgrad/core/device.h"
#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

enum class Backend : uint8_t {
  Auto,  // NCCL for a CUDA `device`, MPI otherwise
  Mpi,   // CPU tensors, over MPI
  Nccl,  // CUDA tensors, over NCCL
};
const char* backend_name(Backend backend);  // "auto", "mpi", "nccl"

struct ProcessGroupOptions {
  Backend backend = Backend::Auto;
  // The device whose tensors the group carries. Unset: the CPU for MPI; for NCCL the GPU
  // cuda:<local rank> (one GPU per rank on each machine), or cuda:0 when the process sees
  // a single GPU (a launcher that hands each rank its own through CUDA_VISIBLE_DEVICES).
  std::optional<Device> device;
  // How long one collective may take before it ends with an mg::Error (ProcessGroup::timeout);
  // also how long the start-up waits for the other ranks.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
};

// The group of every process of the job. May be called more than once (each call gives a
// group of its own: their collectives do not mix); MPI is initialised by the first call
// that needs it and finalised when the process ends.
std::shared_ptr<ProcessGroup> init_process_group(const ProcessGroupOptions& options = {});

}  // namespace mg::distributed
