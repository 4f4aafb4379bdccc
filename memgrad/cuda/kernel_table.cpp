// cuda/kernel_table.cpp — the CUDA kernel table: core/kernels.h's entries, in its order,
// filled with the implementations declared in cuda/kernels/cuda_kernels.h.
#include <string_view>

#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/lt_matmul.h"

namespace mg::cuda {

namespace {

// Random numbers come from (seed, offset) pairs the host hands each kernel as an argument,
// so a captured step would draw the same numbers on every replay: refused while capturing.
constexpr std::string_view kRandomHint =
    "capture the step without randomness on the GPU (dropout p = 0 or the model in eval mode), "
    "and draw random tensors outside the step.";

void dropout_outside_capture(const Tensor& input, double p, PhiloxState rng, const Tensor& mask,
                             const Tensor& output) {
  refuse_during_graph_capture("dropout", kRandomHint);
  dropout(input, p, rng, mask, output);
}

void fill_uniform_outside_capture(const Tensor& destination, double low, double high, PhiloxState rng) {
  refuse_during_graph_capture("rand (uniform random numbers)", kRandomHint);
  fill_uniform(destination, low, high, rng);
}

void fill_normal_outside_capture(const Tensor& destination, double mean, double std, PhiloxState rng) {
  refuse_during_graph_capture("randn (normal random numbers)", kRandomHint);
  fill_normal(destination, mean, std, rng);
}

void multinomial_outside_capture(const Tensor& probs, int64_t num_samples, bool replacement, PhiloxState rng,
                                 const Tensor& output) {
  refuse_during_graph_capture("multinomial sampling", kRandomHint);
  multinomial(probs, num_samples, replacement, rng, output);
}

void attention_forward_outside_capture(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionParams& params, const Tensor& output,
                                       const Tensor& logsumexp) {
  if (params.dropout_p > 0) refuse_during_graph_capture("attention dropout", kRandomHint);
  attention_forward(q, k, v, params, output, logsumexp);
}

}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable table{
      .copy = copy,
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
      .dropout = dropout_outside_capture,
      .masked_scale = masked_scale,
      .fill_uniform = fill_uniform_outside_capture,
      .fill_normal = fill_normal_outside_capture,
      .sgd_step = sgd_step,
      .adam_step = adam_step,
      .adagrad_step = adagrad_step,
      .non_finite_check_and_unscale = non_finite_check_and_unscale,
      .update_scale = update_scale,
      .total_norm_power = total_norm_power,
      .conv2d = conv2d,
      .conv2d_backward_input = conv2d_backward_input,
      .conv2d_backward_weight = conv2d_backward_weight,
      .max_pool2d = max_pool2d,
      .max_pool2d_backward = max_pool2d_backward,
      .avg_pool2d = avg_pool2d,
      .avg_pool2d_backward = avg_pool2d_backward,
      .batch_norm = batch_norm,
      .batch_norm_backward = batch_norm_backward,
      .embedding = embedding,
      .embedding_backward = embedding_backward,
      .layer_norm = layer_norm,
      .layer_norm_backward = layer_norm_backward,
      .masked_fill = masked_fill,
      .topk = topk,
      .multinomial = multinomial_outside_capture,
      .attention_forward = attention_forward_outside_capture,
      .attention_backward = attention_backward,
  };
  return table;
}

}  // namespace mg::cuda
