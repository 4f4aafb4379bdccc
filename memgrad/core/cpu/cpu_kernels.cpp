// core/cpu/cpu_kernels.cpp — the CPU kernel table.
#include "memgrad/core/cpu/cpu_kernels.h"

namespace mg::cpu {

const KernelTable& kernel_table() {
  static const KernelTable table{
      .copy = copy,
      .convert_each = convert_each,
      .fill = fill,
      .unary = unary,
      .binary = binary,
      .binary_scalar = binary_scalar,
      .reduce = reduce,
      .argmax = argmax,
      .matmul = matmul,
      .matmul_into = matmul_into,
      .linear_forward = linear_forward,
      .softmax = softmax,
      .softmax_backward = softmax_backward,
      .nll_forward = nll_forward,
      .nll_backward = nll_backward,
      .cross_entropy_forward = cross_entropy_forward,
      .cross_entropy_backward = cross_entropy_backward,
      .dropout = dropout,
      .masked_scale = masked_scale,
      .fill_uniform = fill_uniform,
      .fill_normal = fill_normal,
      .sgd_step = sgd_step,
      .adam_step = adam_step,
      .adagrad_step = adagrad_step,
      .non_finite_check_and_unscale = non_finite_check_and_unscale,
      .update_scale = update_scale,
      .total_norm_power = total_norm_power,
      .conv2d = conv2d,
      .conv2d_backward_input = conv2d_backward_input,
      .conv2d_backward_weight = conv2d_backward_weight,
      .conv2d_with_statistics = conv2d_with_statistics,
      .conv2d_backward_input_relu_batch_norm = conv2d_backward_input_relu_batch_norm,
      .max_pool2d = max_pool2d,
      .max_pool2d_backward = max_pool2d_backward,
      .avg_pool2d = avg_pool2d,
      .avg_pool2d_backward = avg_pool2d_backward,
      .batch_norm = batch_norm,
      .batch_norm_backward = batch_norm_backward,
      .batch_norm_backward_from_coefficients = batch_norm_backward_from_coefficients,
      .embedding = embedding,
      .embedding_backward = embedding_backward,
      .layer_norm = layer_norm,
      .layer_norm_backward = layer_norm_backward,
      .masked_fill = masked_fill,
      .topk = topk,
      .multinomial = multinomial,
      .gather = gather,
      .scatter_add = scatter_add,
      .attention_forward = attention_forward,
      .attention_backward = attention_backward,
  };
  return table;
}

}  // namespace mg::cpu
