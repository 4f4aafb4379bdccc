// core/cpu/linear_gelu.cpp — the CPU bodies of linear_gelu_forward and linear_gelu_backward
// (core/kernel_list.h): the unfused chain's kernels in order (core/linear_gelu_steps.h), so
// on the CPU the fused op equals the chain bit for bit in every dtype; the CPU is the
// reference the CUDA epilogues are tested against.
#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/linear_gelu_steps.h"

namespace mg::cpu {

void linear_gelu_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, bool tanh,
                         const Tensor& pre_activation, const Tensor& output) {
  linear_gelu_forward_in_steps(kernel_table(), input, weight, bias, tanh, pre_activation, output);
}

void linear_gelu_backward(const Tensor& grad_output, const Tensor& weight, const Tensor& pre_activation, bool tanh,
                          const Tensor& grad_pre, const Tensor& grad_bias) {
  linear_gelu_backward_in_steps(kernel_table(), grad_output, weight, pre_activation, tanh, grad_pre, grad_bias);
}

}  // namespace mg::cpu
