// distributed/simulated_process_group.cpp — collectives of a lone rank that stands for
// every rank: the values as if all ranks held the same data, the memory of the backend it
// mirrors (simulated_process_group.h says which and why).
#include "memgrad/distributed/simulated_process_group.h"

#include <utility>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"

namespace mg::distributed {
namespace {

// Done when started. Holds the collective's tensors (possibly none) until it is waited
// for, tested or dropped.
class SimulatedWork final : public Work {
 public:
  explicit SimulatedWork(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}
  bool is_completed() override {
    tensors_.clear();
    return true;
  }
  void wait() override { tensors_.clear(); }

 private:
  std::vector<Tensor> tensors_;
};

bool has_values(const Tensor& tensor) { return tensor.storage()->has_data(); }

// `tensor`'s elements, flat: (numel,) from `first` on.
Tensor flat_part(const Tensor& tensor, int64_t first, int64_t numel) {
  return make_view(tensor, {numel}, {1}, tensor.storage_offset() + first);
}

// The sum over `size` ranks that all hold `tensor`'s values, in place.
void multiply_by(const Tensor& tensor, int size) {
  kernels(tensor.device()).binary_scalar(BinaryOp::Mul, tensor, size, tensor);
}

int checked_rank(int rank, int size) {
  MG_CHECK(size > 0 && rank >= 0 && rank < size, "SimulatedProcessGroup: rank ", rank, " of ", size,
           " ranks does not exist. Hint: a world size of at least 1 and a rank in 0 .. size - 1.");
  return rank;
}

Backend resolve(Backend mirrored, Device device) {
  if (mirrored != Backend::Auto) return mirrored;
  return device.is_cuda() ? Backend::Nccl : Backend::Mpi;
}

}  // namespace

SimulatedProcessGroup::SimulatedProcessGroup(int rank, int size, Device device, Backend mirrored)
    : ProcessGroup(checked_rank(rank, size), size, /*local_rank=*/rank, kDefaultCollectiveTimeout),
      device_(device),
      mirrored_(resolve(mirrored, device)) {}

void SimulatedProcessGroup::check_on_device(const Tensor& tensor, const char* collective) const {
  MG_CHECK(tensor.device() == device_, collective, ": the simulated process group carries tensors on ", device_,
           ", got ", describe_tensor(tensor), ". Hint: put the model and its tensors on the group's device.");
}

void SimulatedProcessGroup::check_reducible(const Tensor& tensor, const char* collective) const {
  const DType dtype = tensor.dtype();
  const bool mpi_lacks = mirrored_ == Backend::Mpi && is_16_bit_float(dtype);
  MG_CHECK(dtype != DType::Bool && !mpi_lacks, collective, ": the ", distributed::backend_name(mirrored_),
           " backend this simulated group stands in for cannot reduce ", describe_tensor(tensor),
           ". Hint: reduce a float32 (or int32) copy and convert back.");
}

std::shared_ptr<Work> SimulatedProcessGroup::completed(std::vector<Tensor> tensors) const {
  if (mirrored_ != Backend::Mpi) tensors.clear();
  return std::make_shared<SimulatedWork>(std::move(tensors));
}

std::shared_ptr<Work> SimulatedProcessGroup::start_all_reduce(const Tensor& tensor, ReduceOp op) {
  check_on_device(tensor, "all_reduce");
  check_reducible(tensor, "all_reduce");
  if (op == ReduceOp::Sum && has_values(tensor)) multiply_by(tensor, size());
  return completed({tensor});
}

std::shared_ptr<Work> SimulatedProcessGroup::start_broadcast(const Tensor& tensor, int) {
  check_on_device(tensor, "broadcast");
  return completed({tensor});
}

std::shared_ptr<Work> SimulatedProcessGroup::start_reduce_scatter(const Tensor& output, const Tensor& input,
                                                                  ReduceOp op) {
  check_on_device(input, "reduce_scatter");
  check_reducible(input, "reduce_scatter");
  if (has_values(output)) {
    NoGradGuard no_grad;  // collectives move values, never autograd history
    const Tensor flat_output = flat_part(output, 0, output.numel());
    flat_output.copy_(flat_part(input, rank() * output.numel(), output.numel()));
    if (op == ReduceOp::Sum) multiply_by(flat_output, size());
  }
  return completed({output, input});
}

std::shared_ptr<Work> SimulatedProcessGroup::start_all_gather(const Tensor& output, const Tensor& input) {
  check_on_device(input, "all_gather");
  if (has_values(output)) {
    NoGradGuard no_grad;
    const Tensor flat_input = flat_part(input, 0, input.numel());
    for (int chunk = 0; chunk < size(); ++chunk) {
      flat_part(output, chunk * input.numel(), input.numel()).copy_(flat_input);
    }
  }
  return completed({output, input});
}

std::shared_ptr<Work> SimulatedProcessGroup::start_barrier() {
  // NCCL's barrier is an all_reduce of one float it allocates on the device.
  if (mirrored_ == Backend::Nccl) {
    const Tensor token = zeros({1}, {.device = device_});  // freed on return, as NCCL's
  }
  return completed({});
}

}  // namespace mg::distributed
