// distributed/process_group.h — ProcessGroup: the processes (ranks) that train together,
// and the collectives they call together on tensors, whatever carries them (MPI between
// CPU processes; NCCL between GPUs: nccl_process_group.h).
//
//   auto group = mg::distributed::init_process_group();        // under mpirun -np N
//   group->all_reduce(gradient, ReduceOp::Average)->wait();     // every rank, same order
//
// Every collective is asynchronous: it starts and returns a Work (distributed/work.h) at
// once. Every rank must call the same collectives, on tensors of the same dtype and
// element count, in the same order; a collective that some rank never joins ends, after
// the group's timeout, with an mg::Error instead of a hang (and the MPI job, once that
// process ends, with MPI_Abort: distributed/mpi_runtime.h says why).
//
// The checks every backend shares (tensors defined and contiguous, element counts that
// fit the group's size, a root that exists) run here, before the backend starts anything,
// so that a mistake is reported on the rank that made it, with the shapes involved.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "memgrad/core/tensor.h"
#include "memgrad/distributed/work.h"

namespace mg::distributed {

enum class ReduceOp : uint8_t {
  Sum,
  Average,  // the sum divided by the group's size; floating dtypes only
};
const char* reduce_op_name(ReduceOp op);  // "sum", "average"

// How long a collective may take before it is declared lost (PyTorch's default is 30 min
// for NCCL; a lost collective on a CPU job shows much sooner).
inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout = std::chrono::seconds(300);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }             // 0 .. size() - 1
  int size() const { return size_; }             // the number of ranks (world size)
  int local_rank() const { return local_rank_; } // the rank among those on this machine
  // "mpi", "nccl": named in error messages.
  virtual const char* backend_name() const = 0;
  // Where the group's tensors must be: the CPU (MPI), this rank's GPU (NCCL).
  virtual Device device() const = 0;

  // How long a collective may run (from its start) before wait() throws. Applies to
  // collectives started after the call.
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout);

  // In place: every rank's `tensor` becomes the element-wise sum (or average) over ranks.
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // In place: every rank's `tensor` becomes rank `root`'s.
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0);
  // `input` holds size() equal chunks of output.numel() elements (in rank order); rank r's
  // `output` becomes the sum (or average) over ranks of chunk r. As PyTorch's
  // reduce_scatter_tensor. `output` and `input` must not overlap.
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const Tensor& input,
                                       ReduceOp op = ReduceOp::Sum);
  // `output` (size() * input.numel() elements) becomes every rank's `input`, in rank order.
  // As PyTorch's all_gather_into_tensor. `output` and `input` must not overlap.
  std::shared_ptr<Work> all_gather(const Tensor& output, const Tensor& input);
  // Done once every rank has called it.
  std::shared_ptr<Work> barrier();

 protected:
  ProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout);

  // The backend's side of each collective, called once the shared checks have passed.
  virtual std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) = 0;
  virtual std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input,
                                                     ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) = 0;
  virtual std::shared_ptr<Work> start_barrier() = 0;

 private:
  int rank_;
  int size_;
  int local_rank_;
  std::chrono::milliseconds timeout_;
};

// "a float32 tensor of shape [2, 3] on cpu", for error messages.
std::string describe_tensor(const Tensor& tensor);

}  // namespace mg::distributed
