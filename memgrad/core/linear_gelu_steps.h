// core/linear_gelu_steps.h — linear_gelu_forward and linear_gelu_backward (core/kernel_list.h)
// as the unfused chain's own kernels, in order, on any kernel table: the product (with its
// bias), then gelu; or the product, gelu's gradient and the bias gradient's column sum.
// They are the CPU's kernels (so on the CPU the fused op equals the chain linear -> gelu
// bit for bit) and what CUDA runs where no cuBLASLt epilogue applies (cuda/linear_gelu.cpp).
#pragma once

#include "memgrad/core/kernels.h"

namespace mg {

void linear_gelu_forward_in_steps(const KernelTable& kernel, const Tensor& input, const Tensor& weight,
                                  const Tensor& bias, bool tanh, const Tensor& pre_activation, const Tensor& output);
void linear_gelu_backward_in_steps(const KernelTable& kernel, const Tensor& grad_output, const Tensor& weight,
                                   const Tensor& pre_activation, bool tanh, const Tensor& grad_pre,
                                   const Tensor& grad_bias);
// The bias gradient from the pre-activation's gradient (rows, hidden): its column sums
// into grad_bias (hidden), through the table's reduce.
void linear_bias_gradient(const KernelTable& kernel, const Tensor& grad_pre, const Tensor& grad_bias);

}  // namespace mg
