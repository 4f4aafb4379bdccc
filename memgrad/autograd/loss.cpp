// autograd/loss.cpp — nll_loss and cross_entropy (primitives with their own backward), and
// mse_loss composed from other ops.
//
// nll_loss's node saves only the targets (and, for the mean, the count of counted targets):
// its gradient is -1/count at each target's class, whatever the log-probabilities were.
// The count stays a device tensor, so the mean costs no host synchronisation.
//
// cross_entropy is fused rather than log_softmax + nll_loss: one kernel pass gives each
// row's log-sum-exp and loss, and its node saves the logits, that log-sum-exp (one float per
// row) and the targets. The composite saved an (N, C) log_softmax output besides the
// logits, which the caller usually still holds; the backward, softmax minus the smoothed
// one-hot target, is one kernel too.
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/loss_reduction.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/reduce.h"

namespace mg {

namespace {

Tensor contiguous_or_copy(const Tensor& x) { return x.is_contiguous() ? x : contiguous_copy(x); }

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

// The gradient of each sample's loss, (N) contiguous, from the gradient of the reduced loss:
// grad itself, or the scalar grad spread over the batch (divided by the count for the mean).
Tensor per_sample_grad(const Tensor& grad, Reduction reduction, const Tensor& count, int64_t batch) {
  Tensor grad_losses = reduction == Reduction::None ? grad : make_view(grad, {batch}, {0}, grad.storage_offset());
  if (reduction == Reduction::Mean) {
    Tensor scaled = autograd::new_output({batch}, grad.dtype(), grad);
    kernels(grad.device()).binary(BinaryOp::Div, grad_losses, count, scaled);
    return scaled;
  }
  return contiguous_or_copy(grad_losses);
}

// nll_loss after check_class_targets.
Tensor nll_loss_checked(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  Tensor log_p = contiguous_or_copy(log_probs);
  Tensor labels = contiguous_or_copy(target);
  int64_t batch = log_p.sizes()[0];
  Tensor losses = autograd::new_output({batch}, log_p.dtype(), log_p);  // (N)
  kernels(log_p.device()).nll_forward(log_p, labels, ignore_index, losses);
  Tensor count;
  Tensor out = autograd::reduce_per_sample(losses, labels, reduction, ignore_index, count);

  if (autograd::needs_grad(log_probs)) {
    autograd::record(
        "NllLossBackward", out, {log_probs, target}, autograd::saved(labels, count),
        [reduction, ignore_index, log_probs_sizes = log_p.sizes()](const autograd::Node&, const Tensor& grad,
                                                                   const Tensor& saved_target,
                                                                   const Tensor& saved_count) {
          Tensor grad_losses = per_sample_grad(grad, reduction, saved_count, log_probs_sizes[0]);
          Tensor grad_input = autograd::new_output(log_probs_sizes, grad.dtype(), grad);
          kernels(grad.device()).nll_backward(grad_losses, saved_target, ignore_index, grad_input);
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

// cross_entropy after check_class_targets, its loss in `loss_dtype`: the logits' own, or
// float32 for 16-bit logits under autocast (the kernels then read the 16-bit logits as they
// are and compute in float32; the gradient keeps the logits' dtype).
Tensor cross_entropy_checked(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options,
                             DType loss_dtype) {
  double smoothing = options.label_smoothing;
  MG_CHECK(smoothing >= 0.0 && smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
           smoothing);
  // PyTorch's label smoothing: each counted sample pays (1 - s) times its nll plus s times
  // -mean over classes of log_softmax (the cross entropy against a uniform target).
  Tensor scores = contiguous_or_copy(logits);  // (N, C)
  Tensor labels = contiguous_or_copy(target);
  int64_t batch = scores.sizes()[0];
  Tensor losses = autograd::new_output({batch}, loss_dtype, scores);  // (N)
  // One float per row; float64 logits keep float64.
  DType lse_dtype = scores.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor log_sum_exp = autograd::new_output({batch}, lse_dtype, scores);  // (N)
  int64_t ignore_index = options.ignore_index;
  kernels(scores.device()).cross_entropy_forward(scores, labels, ignore_index, smoothing, losses, log_sum_exp);
  Tensor count;
  Tensor out = autograd::reduce_per_sample(losses, labels, options.reduction, ignore_index, count);

  if (autograd::needs_grad(logits)) {
    autograd::record(
        "CrossEntropyBackward", out, {logits, target}, autograd::saved(scores, log_sum_exp, labels, count),
        [reduction = options.reduction, ignore_index, smoothing](
            const autograd::Node&, const Tensor& grad, const Tensor& saved_logits, const Tensor& saved_log_sum_exp,
            const Tensor& saved_target, const Tensor& saved_count) {
          Tensor grad_losses = per_sample_grad(grad, reduction, saved_count, saved_logits.sizes()[0]);
          Tensor grad_logits = autograd::new_output(saved_logits.sizes(), saved_logits.dtype(), grad);
          kernels(grad.device())
              .cross_entropy_backward(grad_losses, saved_logits, saved_log_sum_exp, saved_target, ignore_index,
                                      smoothing, grad_logits);
          return std::vector<Tensor>{grad_logits, Tensor()};
        });
  }
  return out;
}

}  // namespace

// Autocast (autocast/cast_policy.h) computes losses in float32: the log-sum-exp and the sum over
// the batch need float32's range and precision, and the loss the user reads is float32.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  check_class_targets("nll_loss", log_probs, target);
  if (amp::is_autocast_on_for(log_probs)) {
    return nll_loss_checked(amp::cast_to_float32(log_probs), target, reduction, ignore_index);
  }
  return nll_loss_checked(log_probs, target, reduction, ignore_index);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  check_class_targets("cross_entropy", logits, target);
  // Under autocast the loss is float32, as in PyTorch. NOTE: 16-bit logits are not cast up
  // first: a float32 copy (N x 50304 for GPT-2) would cost twice their bytes, saved for the
  // backward, and two more passes over them; the kernels compute in float32 anyway.
  const bool sixteen_bit = is_16_bit_float(logits.dtype());
  const bool float32_loss = sixteen_bit && amp::is_autocast_on_for(logits);
  return cross_entropy_checked(logits, target, options, float32_loss ? DType::Float32 : logits.dtype());
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
