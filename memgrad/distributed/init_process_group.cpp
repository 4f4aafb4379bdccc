// distributed/init_process_group.cpp — init_process_group: reads who launched this process,
// picks the backend, and gives NCCL the way its unique id travels from rank 0 (MPI under
// mpirun, TCP otherwise). The backends themselves are in mpi_process_group.cpp and
// nccl_process_group.cpp.
#include "memgrad/distributed/init_process_group.h"

#include <cstring>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/distributed/process_group_backends.h"
#include "memgrad/distributed/tcp_rendezvous.h"
#if defined(MG_WITH_MPI)
#include "memgrad/distributed/mpi_runtime.h"
#endif

namespace mg::distributed {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::Auto: return "auto";
    case Backend::Mpi: return "mpi";
    case Backend::Nccl: return "nccl";
  }
  MG_ASSERT(false, "unknown Backend ", static_cast<int>(backend));
}

namespace {

Backend chosen_backend(const ProcessGroupOptions& options) {
  if (options.backend != Backend::Auto) return options.backend;
  return options.device && options.device->is_cuda() ? Backend::Nccl : Backend::Mpi;
}

// The group MPI made must be the world the launcher described.
void check_same_world(const ProcessGroup& group, const LaunchEnvironment& launch) {
  if (launch.launcher == Launcher::None) return;
  MG_CHECK(group.size() == launch.world_size && group.rank() == launch.rank,
           "init_process_group: world size mismatch: MPI says this process is rank ", group.rank(),
           " of ", group.size(), ", but the launcher's variables (", launcher_name(launch.launcher),
           ") say rank ", launch.rank, " of ", launch.world_size, ". Hint: start every rank with "
           "the same launcher, and leave RANK/WORLD_SIZE unset under mpirun.");
}

std::shared_ptr<ProcessGroup> init_mpi(const ProcessGroupOptions& options,
                                       const LaunchEnvironment& launch) {
  MG_CHECK(!options.device || options.device->is_cpu(), "init_process_group: the MPI backend "
           "carries CPU tensors, not tensors on ", *options.device, ". Hint: use Backend::Nccl "
           "(or Backend::Auto with a CUDA device) for CUDA tensors.");
  MG_CHECK(launch.launcher != Launcher::Torchrun || launch.world_size == 1,
           "init_process_group: the MPI backend starts its ranks through mpirun, but this process "
           "(RANK=", launch.rank, ", WORLD_SIZE=", launch.world_size, ") was started without it. "
           "Hint: start the job with mpirun -np ", launch.world_size, ", or use the NCCL backend "
           "(Backend::Nccl) on CUDA tensors, which torchrun-style variables can start.");
  std::shared_ptr<ProcessGroup> group = make_mpi_process_group(options.timeout);
  check_same_world(*group, launch);
  return group;
}

// NOTE: under mpirun MPI carries the id even when MASTER_ADDR/MASTER_PORT are set: mpirun
// already knows every rank, and no port has to be free.
ShareFromRank0 id_sharing(const ProcessGroupOptions& options, const LaunchEnvironment& launch) {
  if (launch.world_size == 1) return [](const std::vector<std::byte>& bytes) { return bytes; };
#if defined(MG_WITH_MPI)
  if (launch.launcher == Launcher::Mpirun) {
    return [timeout = options.timeout, launch](const std::vector<std::byte>& bytes) {
      const std::shared_ptr<ProcessGroup> mpi_group = make_mpi_process_group(timeout);
      check_same_world(*mpi_group, launch);
      Tensor carrier = empty({static_cast<int64_t>(bytes.size())}, {.dtype = DType::UInt8});
      std::memcpy(carrier.raw_data(), bytes.data(), bytes.size());
      mpi_group->broadcast(carrier, /*root=*/0)->wait();
      std::vector<std::byte> shared(bytes.size());
      std::memcpy(shared.data(), carrier.raw_data(), shared.size());
      return shared;
    };
  }
#endif
  return [rendezvous = RendezvousOptions{.master_addr = launch.master_addr,
                                         .master_port = launch.master_port,
                                         .rank = launch.rank,
                                         .world_size = launch.world_size,
                                         .timeout = options.timeout}](
             const std::vector<std::byte>& bytes) { return rendezvous_broadcast(rendezvous, bytes); };
}

// Under mpirun, a lost NCCL collective ends the job at exit as a lost MPI one does
// (mpi_runtime.h): MPI_Finalize would wait for the stuck ranks.
LostCollectiveHandler lost_collective_handler(const LaunchEnvironment& launch) {
#if defined(MG_WITH_MPI)
  if (launch.launcher == Launcher::Mpirun && launch.world_size > 1) {
    return [](const std::string& description) { mpi::note_lost_collective(description); };
  }
#endif
  return {};
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const ProcessGroupOptions& options) {
  MG_CHECK(options.timeout.count() > 0, "init_process_group: the timeout must be positive, got ",
           options.timeout.count(), " ms.");
  const LaunchEnvironment launch = read_launch_environment();
  if (chosen_backend(options) == Backend::Mpi) return init_mpi(options, launch);
  return make_nccl_process_group(options, launch, id_sharing(options, launch),
                                 lost_collective_handler(launch));
}

}  // namespace mg::distributed
