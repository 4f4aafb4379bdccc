// core/linear_gelu_steps.cpp — the fused MLP kernels as the unfused chain's steps.
#include "memgrad/core/linear_gelu_steps.h"

#include "memgrad/core/factory.h"

namespace mg {

namespace {

// (rows, cols) contiguous as the (1, rows, cols) batch matmul takes; `transpose` views it as
// (1, cols, rows) instead (no copy).
Tensor as_batch_of_one(const Tensor& matrix, bool transpose = false) {
  int64_t rows = matrix.sizes()[0], cols = matrix.sizes()[1];
  if (transpose) return make_view(matrix, {1, cols, rows}, {0, 1, cols}, matrix.storage_offset());
  return make_view(matrix, {1, rows, cols}, {0, cols, 1}, matrix.storage_offset());
}

}  // namespace

void linear_gelu_forward_in_steps(const KernelTable& kernel, const Tensor& input, const Tensor& weight,
                                  const Tensor& bias, bool tanh, const Tensor& pre_activation, const Tensor& output) {
  if (bias.defined()) {
    kernel.linear_forward(input, weight, bias, pre_activation);
  } else {
    kernel.matmul(as_batch_of_one(input), as_batch_of_one(weight, /*transpose=*/true),
                  as_batch_of_one(pre_activation));
  }
  kernel.unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, pre_activation, output);
}

void linear_gelu_backward_in_steps(const KernelTable& kernel, const Tensor& grad_output, const Tensor& weight,
                                   const Tensor& pre_activation, bool tanh, const Tensor& grad_pre,
                                   const Tensor& grad_bias) {
  kernel.matmul(as_batch_of_one(grad_output), as_batch_of_one(weight), as_batch_of_one(grad_pre));  // (rows, in)
  // In place: each element reads only its own position of grad_pre and pre_activation.
  kernel.binary(tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, grad_pre, pre_activation, grad_pre);
  if (grad_bias.defined()) linear_bias_gradient(kernel, grad_pre, grad_bias);
}

void linear_bias_gradient(const KernelTable& kernel, const Tensor& grad_pre, const Tensor& grad_bias) {
  const int64_t features = grad_bias.numel();
  kernel.reduce(ReduceOp::Sum, grad_pre, make_view(grad_bias, {1, features}, {features, 1}, grad_bias.storage_offset()));
}

}  // namespace mg
