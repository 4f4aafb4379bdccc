// distributed/nccl_process_group.cpp — the NCCL backend (nccl_process_group.h): each
// collective checked for CUDA tensors on the group's GPU, mapped to its NCCL call and
// enqueued through the communicator (cuda/nccl_communicator.h); and make_nccl_process_group(),
// which picks the GPU, shares NCCL's unique id from rank 0 and starts the communicator.
#include "memgrad/distributed/nccl_process_group.h"

#include <cstring>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/nccl_communicator.h"
#include "memgrad/distributed/process_group_backends.h"

namespace mg::distributed {
namespace {

// The NCCL type that carries `dtype`'s elements (and adds them, where it is a number).
ncclDataType_t carrier_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::UInt8: return ncclUint8;
    case DType::Bool: return ncclUint8;  // one byte, moved unchanged
  }
  MG_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

ncclDataType_t summable_type(const Tensor& tensor, const char* collective) {
  MG_CHECK(tensor.dtype() != DType::Bool, collective, ": the NCCL backend cannot reduce ",
           describe_tensor(tensor), " (a sum of bools is not a bool). Hint: reduce a uint8 or "
           "int32 copy (t.to(mg::DType::Int32)) and compare with 0.");
  return carrier_type(tensor.dtype());
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Average ? ncclAvg : ncclSum; }

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<cuda::NcclCommunicator> communicator,
           std::shared_ptr<cuda::NcclCollective> collective)
      : communicator_(std::move(communicator)), collective_(std::move(collective)) {}

  bool is_completed() override { return communicator_->is_completed(*collective_); }
  void wait() override { communicator_->wait(*collective_); }
  void synchronize() override { communicator_->synchronize(*collective_); }

 private:
  std::shared_ptr<cuda::NcclCommunicator> communicator_;
  std::shared_ptr<cuda::NcclCollective> collective_;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<cuda::NcclCommunicator> communicator, int rank, int size,
                   int local_rank, std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size, local_rank, timeout), communicator_(std::move(communicator)) {}

  const char* backend_name() const override { return "nccl"; }
  Device device() const override { return communicator_->device(); }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override {
    check_on_device(tensor, "all_reduce");
    const ncclDataType_t type = summable_type(tensor, "all_reduce");
    void* data = tensor.raw_data();
    const size_t count = static_cast<size_t>(tensor.numel());
    return launch(mg::detail::str_cat("all_reduce (", reduce_op_name(op), ") of ",
                                      describe_tensor(tensor)),
                  {tensor}, [=](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllReduce(data, data, count, type, nccl_op(op), comm, stream);
                  });
  }

  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override {
    check_on_device(tensor, "broadcast");
    const ncclDataType_t type = carrier_type(tensor.dtype());
    void* data = tensor.raw_data();
    const size_t count = static_cast<size_t>(tensor.numel());
    return launch(mg::detail::str_cat("broadcast from rank ", root, " of ", describe_tensor(tensor)),
                  {tensor}, [=](ncclComm_t comm, cudaStream_t stream) {
                    return ncclBroadcast(data, data, count, type, root, comm, stream);
                  });
  }

  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input,
                                             ReduceOp op) override {
    check_on_device(input, "reduce_scatter");
    const ncclDataType_t type = summable_type(input, "reduce_scatter");
    const void* send = input.raw_data();
    void* receive = output.raw_data();
    const size_t count = static_cast<size_t>(output.numel());
    return launch(mg::detail::str_cat("reduce_scatter (", reduce_op_name(op), ") of ",
                                      describe_tensor(input), " into ", describe_tensor(output)),
                  {output, input}, [=](ncclComm_t comm, cudaStream_t stream) {
                    return ncclReduceScatter(send, receive, count, type, nccl_op(op), comm, stream);
                  });
  }

  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override {
    check_on_device(input, "all_gather");
    const ncclDataType_t type = carrier_type(input.dtype());
    const void* send = input.raw_data();
    void* receive = output.raw_data();
    const size_t count = static_cast<size_t>(input.numel());
    return launch(mg::detail::str_cat("all_gather of ", describe_tensor(input), " into ",
                                      describe_tensor(output)),
                  {output, input}, [=](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllGather(send, receive, count, type, comm, stream);
                  });
  }

  // NCCL has no barrier: every rank adds one float, and the sum is done once all have come.
  std::shared_ptr<Work> start_barrier() override {
    const Tensor token = zeros({1}, {.device = device()});
    void* data = token.raw_data();
    return launch("barrier", {token}, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, comm, stream);
    });
  }

 private:
  // (The shared checks in process_group.cpp already made both tensors of a pair agree.)
  void check_on_device(const Tensor& tensor, const char* collective) const {
    MG_CHECK(tensor.device().is_cuda(), collective, ": the NCCL backend carries CUDA tensors, got ",
             describe_tensor(tensor), ". Hint: .to(group->device()) first, or use the MPI "
             "backend (ProcessGroupOptions{.backend = Backend::Mpi}) for CPU tensors.");
    MG_CHECK(tensor.device() == device(), collective, ": ", describe_tensor(tensor),
             " is not on this rank's GPU, ", device(), " (one GPU per rank). Hint: "
             ".to(group->device()) first, or pick the GPU with ProcessGroupOptions::device.");
  }

  std::shared_ptr<Work> launch(std::string description, const std::vector<Tensor>& tensors,
                               const cuda::NcclEnqueue& enqueue) {
    auto collective = communicator_->launch(std::move(description), tensors, timeout(), enqueue);
    return std::make_shared<NcclWork>(communicator_, std::move(collective));
  }

  std::shared_ptr<cuda::NcclCommunicator> communicator_;
};

// This rank's GPU: the one asked for, else cuda:<local rank> (cuda:0 when the launcher
// gave each rank a single visible GPU).
Device device_for_rank(const ProcessGroupOptions& options, const LaunchEnvironment& launch) {
  MG_CHECK(!options.device || options.device->is_cuda(), "init_process_group: the NCCL backend "
           "carries CUDA tensors, but the group's device is ", *options.device, ". Hint: leave "
           "ProcessGroupOptions::device unset (the GPU of the local rank), or use Backend::Mpi "
           "for CPU tensors.");
  const int visible = cuda::device_count();
  MG_CHECK(visible > 0, "init_process_group: the NCCL backend needs a GPU, and this process "
           "(rank ", launch.rank, ") sees none. Hint: check CUDA_VISIBLE_DEVICES and nvidia-smi, "
           "or use Backend::Mpi on CPU tensors.");
  if (options.device) {
    MG_CHECK(options.device->index < visible, "init_process_group: ", *options.device,
             " does not exist: this process sees ", visible, " GPU(s).");
    return *options.device;
  }
  if (visible == 1) return Device::cuda(0);
  MG_CHECK(launch.local_rank < visible, "init_process_group: local rank ", launch.local_rank,
           " has no GPU of its own: this process sees ", visible, " GPUs, and NCCL refuses two "
           "ranks on one GPU. Hint: start at most ", visible, " ranks per machine.");
  return Device::cuda(launch.local_rank);
}

}  // namespace

int nccl_version() {
  int version = 0;
  MG_NCCL_CHECK(ncclGetVersion(&version), nullptr);
  return version;
}

std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options,
                                                      const LaunchEnvironment& launch,
                                                      const ShareFromRank0& share_from_rank0,
                                                      LostCollectiveHandler on_lost_collective) {
  const Device device = device_for_rank(options, launch);
  cuda::DeviceGuard guard(device);
  std::vector<std::byte> id_bytes(sizeof(ncclUniqueId));
  if (launch.rank == 0) {
    ncclUniqueId id;
    MG_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    std::memcpy(id_bytes.data(), &id, sizeof id);
  }
  id_bytes = share_from_rank0(id_bytes);
  MG_ASSERT(id_bytes.size() == sizeof(ncclUniqueId), "NCCL id of ", id_bytes.size(), " bytes");
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof id);
  auto communicator = std::make_shared<cuda::NcclCommunicator>(
      device, launch.rank, launch.world_size, id, options.timeout, std::move(on_lost_collective));
  return std::make_shared<NcclProcessGroup>(std::move(communicator), launch.rank,
                                            launch.world_size, launch.local_rank, options.timeout);
}

}  // namespace mg::distributed
