// autograd/loss_reduction.cpp — loss_reduction.h's reduce_per_sample, the reduction of
// per-sample losses. It records no node: the losses' own nodes divide their gradient by
// the count it leaves them.
#include "memgrad/autograd/loss_reduction.h"

#include "memgrad/autograd/op_support.h"

namespace mg::autograd {

namespace {

// (N) in `dtype`: 1 where target is a class, 0 where it is ignore_index.
Tensor counted_targets(const Tensor& target, int64_t ignore_index, DType dtype) {
  const KernelTable& kernel = kernels(target.device());
  Tensor is_counted = new_output(target.sizes(), DType::Bool, target);
  kernel.binary_scalar(BinaryOp::Ne, target, static_cast<double>(ignore_index), is_counted);
  Tensor weights = new_output(target.sizes(), dtype, target);
  kernel.copy(is_counted, weights);
  return weights;
}

}  // namespace

Tensor reduce_per_sample(const Tensor& losses, const Tensor& labels, Reduction reduction, int64_t ignore_index,
                         Tensor& count) {
  if (reduction == Reduction::None) return losses;
  const KernelTable& kernel = kernels(losses.device());
  Tensor out = new_output({}, losses.dtype(), losses);
  Tensor total = make_view(out, {1}, {1}, out.storage_offset());  // the reduce kernel's keepdim form
  kernel.reduce(ReduceOp::Sum, losses, total);
  if (reduction == Reduction::Mean) {
    // NOTE: no counted targets gives 0 / 0 = NaN, as in PyTorch.
    count = new_output({1}, losses.dtype(), losses);
    kernel.reduce(ReduceOp::Sum, counted_targets(labels, ignore_index, losses.dtype()), count);
    kernel.binary(BinaryOp::Div, total, count, total);
  }
  return out;
}

}  // namespace mg::autograd
