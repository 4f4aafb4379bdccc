// cuda/kernels/cuda_kernels.h — the CUDA implementations behind core/kernels.h's table,
// one family per file in cuda/kernels/; cuda/kernel_table.cpp assembles the table. Each
// launches on the current stream of the tensors' device and never synchronises.
#pragma once

#include <span>

#include "memgrad/core/kernels.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda {

// copy_fill.cu
void copy(const Tensor& source, const Tensor& destination);
void fill(const Tensor& destination, double value);
void fill_uniform(const Tensor& destination, double low, double high, PhiloxState rng);
void fill_normal(const Tensor& destination, double mean, double std, PhiloxState rng);
// {base.seed, base.offset} into `words` (two int64 on the device), where a captured step's
// random kernels read them (cuda/captured_step.h); by kernel argument, so without waiting.
void write_philox_base(const Tensor& words, PhiloxState base);

// convert_each.cu
// Multi-tensor, like the optimizers: float32 to float16 / bfloat16 or back, 902 tensors a launch.
void convert_each(std::span<const Tensor> sources, std::span<const Tensor> destinations);

// elementwise.cu
void unary(UnaryOp op, const Tensor& input, const Tensor& output);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output);
void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& output);
void dropout(const Tensor& input, double p, PhiloxState rng, const Tensor& mask, const Tensor& output);
void masked_scale(const Tensor& grad, const Tensor& mask, double scale, const Tensor& output);

// optimizer.cu
// Multi-tensor updates (the table's list contract): many parameters in few launches (up
// to 48 tensors each, plus one launch per 256 step counters), like PyTorch's
// multi_tensor_apply.
void sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
              std::span<const Tensor> momentum_buffers, const SgdHyper& hyper);
void adam_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                     std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
                     std::span<const Tensor> steps, const AdamHyper& hyper);
void adagrad_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
                  std::span<const Tensor> steps, const AdagradHyper& hyper);

// amp.cu
// Unscaling is multi-tensor like the optimizers (a launch per dtype and 1,160 gradients);
// the scale's update is one thread.
void non_finite_check_and_unscale(std::span<const Tensor> grads, const Tensor& found_inf, const Tensor& inv_scale);
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval);

// total_norm.cu
// Multi-tensor too: a launch per dtype and 1,160 tensors into fixed per-block partials, then
// one block combines them.
void total_norm_power(std::span<const Tensor> tensors, double p, const Tensor& partials, const Tensor& result);

// reduce.cu
void reduce(ReduceOp op, const Tensor& input, const Tensor& output);
void argmax(const Tensor& input, int dim, const Tensor& output);

// matmul.cpp (cuBLAS)
void matmul(const Tensor& a, const Tensor& b, const Tensor& output);
void matmul_into(const Tensor& a, const Tensor& b, const Tensor& output, bool accumulate);

// softmax_loss.cu
void softmax(const Tensor& input, int dim, bool log, const Tensor& output);
void softmax_backward(const Tensor& grad_output, const Tensor& output, int dim, bool log,
                      const Tensor& grad_input);
void nll_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& loss);
void nll_backward(const Tensor& grad_loss, const Tensor& target, int64_t ignore_index,
                  const Tensor& grad_input);
void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing,
                           const Tensor& loss, const Tensor& log_sum_exp);
void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& log_sum_exp,
                            const Tensor& target, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits);

// conv.cpp / conv.cu
void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output);
void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate);
void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight);
bool conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Window2d& window, const Tensor& output,
                            const Tensor& sum, const Tensor& square_sum);
bool conv2d_backward_input_relu_batch_norm(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                           const Tensor& bn_input, const Tensor& mean, const Tensor& invstd,
                                           const Tensor& bn_weight, const Tensor& bn_bias, const Tensor& grad_input,
                                           const Tensor& coefficients, const Tensor& grad_bn_weight,
                                           const Tensor& grad_bn_bias);

// pool.cpp / pool.cu
void max_pool2d(const Tensor& input, const Window2d& window, const Tensor& output, const Tensor& window_indices);
void max_pool2d_backward(const Tensor& grad_output, const Tensor& window_indices, const Window2d& window,
                         const Tensor& grad_input);
void avg_pool2d(const Tensor& input, const Window2d& window, const Tensor& output);
void avg_pool2d_backward(const Tensor& grad_output, const Window2d& window, const Tensor& grad_input);

// batch_norm.cpp / batch_norm.cu
void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, const Tensor& num_batches_tracked, bool training, double momentum,
                double eps, bool relu, const Tensor& residual, const ChannelSums& statistics, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd);
void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool relu, const Tensor& output,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_residual);
void batch_norm_backward_from_coefficients(const Tensor& grad, const Tensor& input, const Tensor& coefficients,
                                           const Tensor& grad_input);

// embedding.{cpp,cu}
void embedding(const Tensor& weight, const Tensor& indices, const Tensor& output);
void embedding_backward(const Tensor& grad_output, const Tensor& indices, int64_t padding_idx,
                        const Tensor& grad_weight);

// layer_norm.{cpp,cu}
void layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, double eps, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd);
void layer_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, const Tensor& grad_input,
                         const Tensor& grad_weight, const Tensor& grad_bias);

// masked_fill.{cpp,cu}
void masked_fill(const Tensor& input, const Tensor& mask, double value, const Tensor& output);

// topk.{cpp,cu}
void topk(const Tensor& input, int64_t k, bool largest, const Tensor& values, const Tensor& indices);

// multinomial.{cpp,cu}
void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, PhiloxState rng,
                 const Tensor& output);

// gather.{cpp,cu}
void gather(const Tensor& input, int dim, const Tensor& index, const Tensor& output);
void scatter_add(const Tensor& source, int dim, const Tensor& index, const Tensor& destination);

// attention.{cpp,cu}
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& output, const Tensor& log_sum_exp);
void attention_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                        const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);

}  // namespace mg::cuda
