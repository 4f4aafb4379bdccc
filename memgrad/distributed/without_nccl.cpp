// distributed/without_nccl.cpp — the NCCL backend's maker in a build without NCCL (no CUDA,
// or no NCCL found at configure time): the program builds either way, and asking for the
// backend says how to get it. A build with NCCL defines these in nccl_process_group.cpp.
#include "memgrad/core/error.h"
#include "memgrad/distributed/nccl_process_group.h"
#include "memgrad/distributed/process_group_backends.h"

namespace mg::distributed {

int nccl_version() { return 0; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions&,
                                                      const LaunchEnvironment&,
                                                      const ShareFromRank0&, LostCollectiveHandler) {
#if defined(MG_WITH_CUDA)
  mg::detail::throw_error(
      "init_process_group: the NCCL backend was asked for, but this memgrad was built without "
      "NCCL (MG_WITH_NCCL is off: nccl.h or libnccl was not found at configure time). Hint: "
      "install NCCL (Debian: libnccl-dev; it also comes with some CUDA toolkits), then configure "
      "again with -DMG_WITH_NCCL=ON (and -DMG_NCCL_ROOT=<prefix> if it is not in a standard "
      "place); or use Backend::Mpi on CPU tensors.");
#else
  mg::detail::throw_error(
      "init_process_group: the NCCL backend was asked for, but this memgrad was built without "
      "CUDA (MG_WITH_CUDA is off), and NCCL runs between GPUs. Hint: install the CUDA toolkit "
      "and NCCL, then configure again (-DMG_WITH_CUDA=ON); or use Backend::Mpi on CPU tensors.");
#endif
}

}  // namespace mg::distributed
