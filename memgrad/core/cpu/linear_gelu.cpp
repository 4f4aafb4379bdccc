// core/cpu/linear_gelu.cpp — the CPU bodies of linear_gelu_forward and linear_gelu_backward
// (core/kernel_list.h): Eigen's GEMM (through linear_forward / matmul), then the gelu
// epilogue as one elementwise pass over the product, and the bias gradient as one column
// sum. Each step is the kernel the unfused chain linear -> gelu (and its backward) runs,
// in the same order on the same values, so on the CPU the fused op equals the chain bit for
// bit in every dtype; the CPU is the reference the CUDA epilogues are tested against.
#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/factory.h"

namespace mg::cpu {

namespace {

// (rows, cols) contiguous as the (1, rows, cols) batch matmul takes; `transpose` views it as
// (1, cols, rows) instead (no copy).
Tensor as_batch_of_one(const Tensor& matrix, bool transpose = false) {
  int64_t rows = matrix.sizes()[0], cols = matrix.sizes()[1];
  if (transpose) return make_view(matrix, {1, cols, rows}, {0, 1, cols}, matrix.storage_offset());
  return make_view(matrix, {1, rows, cols}, {0, cols, 1}, matrix.storage_offset());
}

}  // namespace

void linear_gelu_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, bool tanh,
                         const Tensor& pre_activation, const Tensor& output) {
  if (bias.defined()) {
    linear_forward(input, weight, bias, pre_activation);
  } else {
    matmul(as_batch_of_one(input), as_batch_of_one(weight, /*transpose=*/true), as_batch_of_one(pre_activation));
  }
  unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, pre_activation, output);
}

void linear_gelu_backward(const Tensor& grad_output, const Tensor& weight, const Tensor& pre_activation, bool tanh,
                          const Tensor& grad_pre, const Tensor& grad_bias) {
  matmul(as_batch_of_one(grad_output), as_batch_of_one(weight), as_batch_of_one(grad_pre));  // (rows, in)
  // In place: each element reads only its own position of grad_pre and pre_activation.
  binary(tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, grad_pre, pre_activation, grad_pre);
  if (grad_bias.defined()) {
    int64_t features = grad_bias.numel();
    reduce(ReduceOp::Sum, grad_pre, make_view(grad_bias, {1, features}, {features, 1}, grad_bias.storage_offset()));
  }
}

}  // namespace mg::cpu
