// distributed/simulated_process_group.h — rank r of a world of N, alone in this process:
// collectives that complete at once without communicating, and that allocate exactly what
// the real backend's would. What a memory prediction (examples/common/memory_prediction.h)
// runs DDP and ZeRO-1 with on the simulated device, to predict one rank's peak.
//
//   mg::distributed::SimulatedProcessGroup group(/*rank=*/1, /*size=*/4, Device::simulated(0),
//                                                Backend::Nccl);  // rank 1 of 4 GPUs
//   DistributedDataParallel ddp(model, group_ptr);                 // buckets, staging: as on rank 1
//
// Values: there is no other rank, so each collective behaves as if every rank held this
// rank's data (deterministic, and the only values a lone rank can know):
//   all_reduce      Sum multiplies by size(); Average leaves the tensor as it is
//   broadcast       leaves the tensor as it is
//   reduce_scatter  output = chunk rank() of input, times size() for Sum
//   all_gather      every chunk of output = input
// On a device without data (the simulated device) no value is touched.
//
// Memory: the backend it stands in for (`mirrored`) decides, because the real backends
// keep different memory alive:
//   Backend::Mpi   allocates nothing, and holds the collective's tensors until its Work is
//                  waited for (or tested, or dropped): the MPI backend keeps them until it
//                  sees the collective done, which is never before the next MPI call, so a
//                  tensor the caller drops between starting a collective and waiting for
//                  it (ZeRO's all-gather copy) stays allocated until then.
//   Backend::Nccl  holds no tensor (NCCL only notes them on its stream: the caller's
//                  drop frees them, for the allocated bytes, at once); barrier() allocates
//                  and frees one float on the device (NCCL's barrier is a one-float
//                  all_reduce). NOTE: NCCL's stream keeps a freed tensor's block from being
//                  reused until the collective is done (record_stream); with collectives
//                  that are done at once nothing is kept, so reserved bytes may be
//                  predicted a little lower than a GPU run's; allocated bytes are exact.
//   Backend::Auto  NCCL for a CUDA device, MPI otherwise (as init_process_group); give
//                  Backend::Nccl explicitly for a simulated device standing in for a GPU.
// What either library holds outside memgrad's allocator is not counted, as in a real run.
// The dtypes the mirrored backend cannot reduce (bool; for MPI also float16 and bfloat16)
// are refused as it refuses them.
#pragma once

#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

class SimulatedProcessGroup final : public ProcessGroup {
 public:
  // `device`: where the tensors of the code using the group live (one device, as a real
  // group's). `rank` in 0 .. size - 1.
  SimulatedProcessGroup(int rank, int size, Device device, Backend mirrored = Backend::Auto);
  const char* backend_name() const override { return "simulated"; }
  Device device() const override { return device_; }
  // Mpi or Nccl: the backend whose memory it reproduces (never Auto).
  Backend mirrored() const { return mirrored_; }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override;
  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input,
                                             ReduceOp op) override;
  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> start_barrier() override;

 private:
  void check_on_device(const Tensor& tensor, const char* collective) const;
  void check_reducible(const Tensor& tensor, const char* collective) const;
  // A Work done at once; it holds `tensors` until waited for when mirroring MPI.
  std::shared_ptr<Work> completed(std::vector<Tensor> tensors) const;

  Device device_;
  Backend mirrored_;
};

}  // namespace mg::distributed
