// autograd/loss.cpp — nll_loss (a primitive with its own backward), and cross_entropy and
// mse_loss composed from other ops.
//
// nll_loss's node saves only the targets (and, for the mean, the count of counted targets):
// its gradient is -1/count at each target's class, whatever the log-probabilities were.
// The count stays a device tensor, so the mean costs no host synchronisation.
#include "autograd/loss.h"

#include "autograd/elementwise.h"
#include "autograd/function.h"
#include "autograd/op_support.h"
#include "autograd/reduce.h"
#include "autograd/softmax.h"

namespace mg {

namespace {

// (N) in `dtype`: 1 where target is a class, 0 where it is ignore_index.
Tensor counted_targets(const Tensor& target, int64_t ignore_index, DType dtype) {
  const KernelTable& kernel = kernels(target.device());
  Tensor is_counted = autograd::new_output(target.sizes(), DType::Bool, target);
  kernel.binary_scalar(BinaryOp::Ne, target, static_cast<double>(ignore_index), is_counted);
  Tensor weights = autograd::new_output(target.sizes(), dtype, target);
  kernel.copy(is_counted, weights);
  return weights;
}

// Checks (N, C) scores against (N) int64 class indices; `op` names the user's call.
void check_class_targets(const char* op, const Tensor& scores, const Tensor& target) {
  autograd::check_defined(op, scores);
  autograd::check_defined(op, target);
  autograd::check_floating(op, scores);
  autograd::check_same_device(op, scores, target);
  MG_CHECK(scores.dim() == 2, op, ": expected input of shape (N, C), got shape ", scores.sizes());
  MG_CHECK(target.dtype() == DType::Int64, op, ": target must hold int64 class indices, got ", target.dtype(),
           "; hint: labels.to(mg::DType::Int64)");
  MG_CHECK(target.dim() == 1 && target.sizes()[0] == scores.sizes()[0], op, ": target of shape ", target.sizes(),
           " does not match input of shape ", scores.sizes(), "; expected target of shape [", scores.sizes()[0],
           "] (one class index per row)");
}

// nll_loss after check_class_targets.
Tensor nll_loss_checked(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  const KernelTable& kernel = kernels(log_probs.device());
  Tensor log_p = log_probs.is_contiguous() ? log_probs : contiguous_copy(log_probs);
  Tensor labels = target.is_contiguous() ? target : contiguous_copy(target);
  int64_t batch = log_p.sizes()[0];
  Tensor losses = autograd::new_output({batch}, log_p.dtype(), log_p);  // (N)
  kernel.nll_forward(log_p, labels, ignore_index, losses);

  Tensor out = losses, count;
  if (reduction != Reduction::None) {
    out = autograd::new_output({}, log_p.dtype(), log_p);
    Tensor total = make_view(out, {1}, {1}, out.storage_offset());  // the reduce kernel's keepdim form
    kernel.reduce(ReduceOp::Sum, losses, total);
    if (reduction == Reduction::Mean) {
      // NOTE: no counted targets gives 0 / 0 = NaN, as in PyTorch.
      count = autograd::new_output({1}, log_p.dtype(), log_p);
      kernel.reduce(ReduceOp::Sum, counted_targets(labels, ignore_index, log_p.dtype()), count);
      kernel.binary(BinaryOp::Div, total, count, total);
    }
  }

  if (autograd::needs_grad(log_probs)) {
    autograd::record(
        "NllLossBackward", out, {log_probs, target}, autograd::saved(labels, count),
        [reduction, ignore_index, log_probs_sizes = log_p.sizes()](const autograd::Node&, const Tensor& grad,
                                                                   const Tensor& saved_target,
                                                                   const Tensor& saved_count) {
          const KernelTable& kernel = kernels(grad.device());
          int64_t batch = log_probs_sizes[0];
          // The gradient of each sample's loss, (N): grad itself, or the scalar grad spread
          // over the batch with stride 0 (divided by the count for the mean).
          Tensor grad_losses =
              reduction == Reduction::None ? grad : make_view(grad, {batch}, {0}, grad.storage_offset());
          if (reduction == Reduction::Mean) {
            Tensor scaled = autograd::new_output({batch}, grad.dtype(), grad);
            kernel.binary(BinaryOp::Div, grad_losses, saved_count, scaled);
            grad_losses = scaled;
          } else if (!grad_losses.is_contiguous()) {
            grad_losses = contiguous_copy(grad_losses);
          }
          Tensor grad_input = autograd::new_output(log_probs_sizes, grad.dtype(), grad);
          kernel.nll_backward(grad_losses, saved_target, ignore_index, grad_input);
          return std::vector<Tensor>{grad_input, Tensor()};
        });
  }
  return out;
}

Tensor reduce_losses(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean: return mean(losses);
    case Reduction::Sum: return sum(losses);
    case Reduction::None: return losses;
  }
  MG_ASSERT(false, "unknown reduction ", static_cast<int>(reduction));
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  check_class_targets("nll_loss", log_probs, target);
  return nll_loss_checked(log_probs, target, reduction, ignore_index);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  check_class_targets("cross_entropy", logits, target);
  double smoothing = options.label_smoothing;
  MG_CHECK(smoothing >= 0.0 && smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
           smoothing);
  Tensor log_p = log_softmax(logits, 1);  // (N, C)
  Tensor nll = nll_loss_checked(log_p, target, options.reduction, options.ignore_index);
  if (smoothing == 0.0) return nll;

  // PyTorch's label smoothing: each counted sample also pays -mean over classes of log_p
  // (the cross entropy against a uniform target), with the nll's reduction.
  Tensor counted = counted_targets(target, options.ignore_index, log_p.dtype());  // (N)
  Tensor uniform_term = mean(log_p, {1}) * counted;                              // (N), 0 where ignored
  Tensor reduced = options.reduction == Reduction::Mean  ? sum(uniform_term) / sum(counted)
                   : options.reduction == Reduction::Sum ? sum(uniform_term)
                                                         : uniform_term;
  return nll * (1.0 - smoothing) - reduced * smoothing;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  autograd::check_defined("mse_loss", input);
  autograd::check_defined("mse_loss", target);
  autograd::check_floating("mse_loss", input);
  MG_CHECK(input.sizes() == target.sizes(), "mse_loss: input of shape ", input.sizes(), " and target of shape ",
           target.sizes(), " differ. memgrad does not broadcast them (PyTorch warns that doing so is "
           "usually a bug). Hint: reshape the target to ", input.sizes(), ".");
  return reduce_losses(pow(input - target, 2.0), reduction);
}

}  // namespace mg
