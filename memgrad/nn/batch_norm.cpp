// nn/batch_norm.cpp — the batch-norm layer: its state, and a call to mg::batch_norm.
#include "memgrad/nn/batch_norm.h"

#include <sstream>

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/core/factory.h"

namespace mg::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine,
                         bool track_running_stats)
    : Module("BatchNorm2d"), num_features_(num_features), eps_(eps), momentum_(momentum) {
  MG_CHECK(num_features > 0, "BatchNorm2d(", num_features,
           "): num_features is the number of channels (dimension 1 of the input) and must be positive");
  MG_CHECK(eps > 0.0, "BatchNorm2d(", num_features, ", eps=", eps,
           "): eps keeps the division away from zero and must be positive");
  MG_CHECK(momentum >= 0.0 && momentum <= 1.0, "BatchNorm2d(", num_features, ", momentum=", momentum,
           "): momentum is the weight of each new batch in the running statistics and must be in [0, 1]");
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros(Shape{}, {.dtype = DType::Int64}));
  }
}

Tensor BatchNorm2d::forward(const Tensor& input) { return normalise(input, /*relu=*/false, Tensor(), {}); }

Tensor BatchNorm2d::forward_relu(const Tensor& input, const ChannelSums& statistics) {
  NamedCall call(*this);
  return normalise(input, /*relu=*/true, Tensor(), statistics);
}

Tensor BatchNorm2d::forward_add_relu(const Tensor& input, const Tensor& residual, const ChannelSums& statistics) {
  NamedCall call(*this);
  return normalise(input, /*relu=*/true, residual, statistics);
}

Tensor BatchNorm2d::normalise(const Tensor& input, bool relu, const Tensor& residual,
                              const ChannelSums& statistics) {
  MG_CHECK(input.dim() == 4 && input.size(1) == num_features_, "BatchNorm2d(", num_features_,
           "): expected an input of shape (N, ", num_features_, ", H, W), got ", input.sizes(),
           "; check the layer's num_features against the channels of the layer before it");
  // Without running statistics there is nothing to normalise with but the batch's own,
  // in evaluation too (PyTorch's rule).
  bool use_batch_stats = is_training() || !running_mean.defined();
  // NOTE: a checkpoint recomputing this layer for backward already updated the running
  // statistics at its forward; this pass normalises with the batch's statistics (the same
  // ones) and tracks nothing, so one step moves them once, as without checkpointing.
  bool recomputing = is_training() && autograd::is_recomputing();
  Tensor tracked_mean = recomputing ? Tensor() : running_mean;
  Tensor tracked_var = recomputing ? Tensor() : running_var;
  // NOTE: a counter, not part of any graph; PyTorch keeps it for momentum=None (a
  // cumulative average) and so that state_dicts carry the same keys. The op's kernel
  // increments it (no launch of its own), in training only: not in evaluation, which may
  // normalise with the batch's statistics too (use_batch_stats), nor when recomputing.
  Tensor counted = is_training() && !recomputing ? num_batches_tracked : Tensor();
  if (residual.defined()) {
    return batch_norm_add_relu(input, residual, tracked_mean, tracked_var, weight, bias, use_batch_stats, momentum_,
                               eps_, statistics, counted);
  }
  auto* op = relu ? batch_norm_relu : batch_norm;
  return op(input, tracked_mean, tracked_var, weight, bias, use_batch_stats, momentum_, eps_, statistics, counted);
}

std::string BatchNorm2d::extra_repr() const {
  // std::ostream prints 1e-05 and 0.1 just as Python does for these usual values.
  std::ostringstream text;
  text << num_features_ << ", eps=" << eps_ << ", momentum=" << momentum_
       << ", affine=" << (weight.defined() ? "True" : "False")
       << ", track_running_stats=" << (running_mean.defined() ? "True" : "False");
  return text.str();
}

}  // namespace mg::nn
