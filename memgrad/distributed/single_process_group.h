// distributed/single_process_group.h — a process group of one process, in this process:
// no MPI, no NCCL, no launcher. Every collective over one rank leaves its tensors as they
// are (all_reduce, broadcast) or copies input to output (reduce_scatter, all_gather), on
// any device, in stream order.
//
//   auto group = std::make_shared<mg::distributed::SingleProcessGroup>();
//   mg::distributed::DistributedDataParallel ddp(model, group);   // the data-parallel code
//                                                                  // path, world size 1
//
// What it is for: running code written for data-parallel training (DDP, ZeRO-1) as one
// process where no multi-process backend is available or wanted (a build without MPI, a
// debugger, a test under a leak checker), with the same memory and the same code path as a
// world of one over MPI or NCCL.
#pragma once

#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

class SingleProcessGroup final : public ProcessGroup {
 public:
  // `device`: where the tensors of the code using the group live (any device works).
  explicit SingleProcessGroup(Device device = Device::cpu());
  const char* backend_name() const override { return "single-process"; }
  Device device() const override { return device_; }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override;
  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input,
                                             ReduceOp op) override;
  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> start_barrier() override;

 private:
  Device device_;
};

}  // namespace mg::distributed
