// distributed/process_group.cpp — the checks every backend's collectives share, made on the
// calling rank before anything is sent, so a mistake names the shapes that caused it.
#include "memgrad/distributed/process_group.h"

#include <cstdint>

#include "memgrad/core/error.h"

namespace mg::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Average: return "average";
  }
  MG_ASSERT(false, "unknown ReduceOp ", static_cast<int>(op));
}

std::string describe_tensor(const Tensor& tensor) {
  if (!tensor.defined()) return "an undefined tensor";
  const char* dtype = dtype_name(tensor.dtype());
  const char* article = dtype[0] == 'i' ? "an " : "a ";  // an int64, a float32
  return mg::detail::str_cat(article, dtype, " tensor of shape ", tensor.sizes(), " on ",
                             tensor.device());
}

ProcessGroup::ProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), local_rank_(local_rank), timeout_(timeout) {
  MG_ASSERT(size > 0 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
  set_timeout(timeout);
}

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  MG_CHECK(timeout.count() > 0, "ProcessGroup: the collective timeout must be positive, got ",
           timeout.count(), " ms.");
  timeout_ = timeout;
}

namespace {

// A collective reads and writes the tensor's bytes as one flat block.
void check_usable(const Tensor& tensor, const char* collective, const char* role) {
  MG_CHECK(tensor.defined(), collective, ": the ", role, " is undefined.");
  MG_CHECK(tensor.is_contiguous(), collective, ": the ", role, " (", describe_tensor(tensor),
           ", strides ", tensor.strides(), ") is not contiguous; collectives carry one flat "
           "block of elements. Hint: pass t.contiguous() and copy the result back.");
}

void check_reduce_op(const Tensor& tensor, ReduceOp op, const char* collective) {
  MG_CHECK(op != ReduceOp::Average || is_floating(tensor.dtype()), collective,
           ": ReduceOp::Average needs a floating-point tensor, got ", describe_tensor(tensor),
           ". Hint: reduce with ReduceOp::Sum and divide as your integers need.");
}

// `output` and `input` of one collective: same dtype and device, and no shared bytes
// (the transports read one while writing the other).
void check_pair(const Tensor& output, const Tensor& input, const char* collective) {
  check_usable(output, collective, "output tensor");
  check_usable(input, collective, "input tensor");
  MG_CHECK(output.dtype() == input.dtype() && output.device() == input.device(), collective,
           ": the output (", describe_tensor(output), ") and the input (", describe_tensor(input),
           ") must have the same dtype and device.");
  // Byte offsets within the storage, not addresses: a simulated device's tensors have none.
  const auto output_begin = static_cast<size_t>(output.storage_offset()) * output.element_size();
  const auto input_begin = static_cast<size_t>(input.storage_offset()) * input.element_size();
  const bool overlap = output.storage() == input.storage() &&
                       output_begin < input_begin + input.nbytes() &&
                       input_begin < output_begin + output.nbytes();
  MG_CHECK(!overlap, collective, ": the output (", describe_tensor(output), ") and the input (",
           describe_tensor(input), ") share bytes. Hint: give the output its own tensor.");
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_usable(tensor, "all_reduce", "tensor");
  check_reduce_op(tensor, op, "all_reduce");
  return start_all_reduce(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_usable(tensor, "broadcast", "tensor");
  MG_CHECK(root >= 0 && root < size_, "broadcast: root rank ", root, " is not in this group of ",
           size_, " ranks (0 .. ", size_ - 1, ").");
  return start_broadcast(tensor, root);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input,
                                                   ReduceOp op) {
  check_pair(output, input, "reduce_scatter");
  check_reduce_op(input, op, "reduce_scatter");
  MG_CHECK(input.numel() == output.numel() * size_, "reduce_scatter: the input (",
           describe_tensor(input), ", ", input.numel(), " elements) must hold one chunk of the "
           "output's ", output.numel(), " elements per rank: ", output.numel() * size_,
           " elements for ", size_, " ranks.");
  return start_reduce_scatter(output, input, op);
}

std::shared_ptr<Work> ProcessGroup::all_gather(const Tensor& output, const Tensor& input) {
  check_pair(output, input, "all_gather");
  MG_CHECK(output.numel() == input.numel() * size_, "all_gather: the output (",
           describe_tensor(output), ", ", output.numel(), " elements) must hold the input's ",
           input.numel(), " elements once per rank: ", input.numel() * size_, " elements for ",
           size_, " ranks.");
  return start_all_gather(output, input);
}

std::shared_ptr<Work> ProcessGroup::barrier() { return start_barrier(); }

}  // namespace mg::distributed
