// autograd/norm.h — batch normalisation over (N, H, W) per channel for (N, C, H, W) or
// (N, C) inputs, training (batch statistics, running statistics updated in place, not
// differentiated) and evaluation (running statistics); alone, fused with a ReLU, or fused
// with a residual add and a ReLU (a ResNet block's end).
#pragma once

#include "memgrad/core/channel_sums.h"
#include "memgrad/core/tensor.h"

namespace mg {

// weight and bias (C) may be undefined; running_mean / running_var (C) may be undefined
// in training (then nothing is tracked) but are required in evaluation.
// statistics (all three ops; training only, evaluation ignores them): the input's
// per-channel sum and sum of squares made with it (autograd/conv.h's
// conv2d_with_statistics), so that the op skips its own statistics pass; the variance is
// then E[x^2] - E[x]^2 of them (plain float32 sums: precise while |mean| is not far above
// the standard deviation, as for a convolution's output).
// num_batches_tracked (all three ops; or undefined): a 0-d int64 counter on the input's
// device (nn::BatchNorm2d's buffer), incremented by one in training by the kernel that
// updates the running statistics, rather than by a launch of its own; evaluation leaves it.
// Like the running statistics it is a buffer: not differentiated, not saved.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5, const ChannelSums& statistics = {}, const Tensor& num_batches_tracked = {});

// relu(batch_norm(...)) as one op: one node, which saves what batch_norm's saves (plus the
// bias) and not the ReLU's output, and recomputes the ReLU's mask from the input in
// backward, so neither direction reads or writes the activation a second time.
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                       double eps = 1e-5, const ChannelSums& statistics = {},
                       const Tensor& num_batches_tracked = {});

// relu(batch_norm(input, ...) + residual) as one op, residual of the input's sizes (no
// broadcasting). Training with a residual of the input's dtype and memory layout runs in
// one node (BatchNormAddReluBackward) that never writes batch_norm's output: it saves what
// batch_norm's saves plus its own output (for the ReLU's mask; the next layer's input, so
// no extra memory), hands the masked gradient to the residual and batch_norm's backward of
// it to input, weight and bias. Evaluation, and residuals of another dtype or layout, run
// add_relu(batch_norm(...), residual) instead: the same values.
Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum = 0.1, double eps = 1e-5, const ChannelSums& statistics = {},
                           const Tensor& num_batches_tracked = {});

}  // namespace mg
