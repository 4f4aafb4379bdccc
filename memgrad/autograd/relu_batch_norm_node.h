// autograd/relu_batch_norm_node.h — the node of batch_norm_relu in training
// (BatchNormReluBackward, autograd/norm.cpp), seen from the op that consumes its output.
//
// Batch norm's backward needs two per-channel sums over the gradient reaching its output
// before it can write its input's gradient: a pass over that gradient and the input of
// their own. Where the consumer is a convolution, cuDNN can form those sums, and the
// ReLU's mask, in the epilogue of the convolution's backward data, as it writes that
// gradient (cuda/cudnn/conv.h, conv2d_backward_input_relu_batch_norm). The convolution's
// node then hands the sums here, and this node's backward is one pass: its input's
// gradient from the handed coefficients. The gradient the convolution returns for its
// input is already masked by the ReLU, and the one pass takes it as it is, so the result
// equals the unfused one but for rounding.
//
// A consumer may hand sums over only when its gradient is the only one this node receives
// in the backward (autograd/engine.h, is_sole_consumer): the sums cover that gradient alone.
#pragma once

#include <utility>

#include "memgrad/autograd/node.h"
#include "memgrad/core/tensor.h"

namespace mg::autograd {

class ReluBatchNormNode : public Node {
 public:
  using Node::Node;

  // What batch norm's forward read and saved: its input (the data's dtype and layout),
  // and (C) mean and invstd (float32 for 16-bit inputs), weight and bias (undefined
  // without affine parameters).
  struct Saved {
    Tensor input, mean, invstd, weight, bias;
  };
  virtual Saved saved_for_consumer() = 0;

  // The consumer's sums for this backward: `coefficients` (3, C) float32, as the kernel
  // table's batch_norm_backward_from_coefficients reads them, and the weight's and bias's
  // gradients (C, float32). Used by the next apply() only.
  void hand_over_sums(Tensor coefficients, Tensor grad_weight, Tensor grad_bias) {
    handed_ = {std::move(coefficients), std::move(grad_weight), std::move(grad_bias)};
  }

 protected:
  struct HandedSums {
    Tensor coefficients, grad_weight, grad_bias;
  };
  // The sums handed over for the apply() about to run, and none after it.
  HandedSums take_handed_sums() { return std::exchange(handed_, {}); }

 private:
  HandedSums handed_;
};

}  // namespace mg::autograd
