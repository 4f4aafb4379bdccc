// core/kernel_list.h — core room: every device kernel, written down once. Each entry is
//   MG_KERNEL(name, result type, (parameters))
// under the comment that is its contract. The file has no include guard: it is included
// once for each thing made from the list, with MG_KERNEL defined to make it, and it
// undefines MG_KERNEL at its end. From it come
//   - core/kernels.h's KernelTable (one function pointer per entry),
//   - the declarations of each device's implementations (core/cpu/cpu_kernels.h,
//     cuda/kernels/cuda_kernels.h) and the tables they fill (core/cpu/cpu_kernels.cpp,
//     cuda/kernel_table.cpp): every entry, by name, so that a device missing a kernel (or
//     defining it with another signature) does not compile or link; a device that cannot
//     run an entry still defines it, throwing an mg::Error that says why,
//   - the simulated device's no-op table (core/simulated_kernels.cpp).
// Adding a kernel: docs/adding_an_op.md.
//
// Kernels receive fully-allocated outputs and never allocate their results; they check
// nothing a caller already checked (shapes, dtypes, devices are validated in autograd/).
#ifndef MG_KERNEL
// Included without MG_KERNEL (as the installed package's every-header check does): what the
// list makes for a user is core/kernels.h's KernelTable.
#include "memgrad/core/kernels.h"
#else

// dst = src elementwise; same sizes, any strides, any dtypes (converting).
MG_KERNEL(copy, void, (const Tensor& source, const Tensor& destination))
// destinations[i] = sources[i] converted as copy converts, for many tensors in few
// launches (autograd/copy.h's to_each: a region's autocast casts of its parameters;
// autograd/accumulate_grad.cpp: their 16-bit gradients into float32 .grad). Sources all
// float32 and destinations all float16 or all bfloat16, or the other way round, on one
// device, each destination of its source's sizes, both dense in the source's layout
// (contiguous or channels_last); empty tensors allowed.
MG_KERNEL(convert_each, void, (std::span<const Tensor> sources, std::span<const Tensor> destinations))
MG_KERNEL(fill, void, (const Tensor& destination, double value))
MG_KERNEL(unary, void, (UnaryOp op, const Tensor& input, const Tensor& output))
// a and b broadcast to output's sizes (views with stride 0 where broadcast).
MG_KERNEL(binary, void, (BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output))
MG_KERNEL(binary_scalar, void, (BinaryOp op, const Tensor& a, double scalar, const Tensor& output))
// output has input's rank with size 1 in every reduced dim (keepdim form).
MG_KERNEL(reduce, void, (ReduceOp op, const Tensor& input, const Tensor& output))
// indices (int64) of the maximum along dim; output in keepdim form.
MG_KERNEL(argmax, void, (const Tensor& input, int dim, const Tensor& output))
// output (B, M, N) = a (B, M, K) @ b (B, K, N); any strides; output contiguous.
MG_KERNEL(matmul, void, (const Tensor& a, const Tensor& b, const Tensor& output))
// output (B, M, N) += a @ b when `accumulate`, else = a @ b; output contiguous and either
// a's dtype or float32 for 16-bit a and b (the float32 sum a product accumulates in,
// kept unrounded: linear_cross_entropy sums a weight's gradient over chunks so).
MG_KERNEL(matmul_into, void, (const Tensor& a, const Tensor& b, const Tensor& output, bool accumulate))
// output (rows, out) = input (rows, in) @ weight (out, in)^T + bias (out): a linear layer's
// forward in one call (on CUDA the bias is added in cuBLASLt's GEMM epilogue, not by a
// second pass over the output); all contiguous.
MG_KERNEL(linear_forward, void, (const Tensor& input, const Tensor& weight, const Tensor& bias,
                                 const Tensor& output))
// pre_activation (rows, out) = input (rows, in) @ weight (out, in)^T + bias (out) and
// output = gelu(pre_activation), the tanh form when `tanh`, else the exact (erf) form: the
// first half of a transformer's MLP in one call (on CUDA cuBLASLt's GELU_AUX_BIAS epilogue
// writes both, tanh form only). bias may be undefined; all contiguous, one dtype.
MG_KERNEL(linear_gelu_forward, void, (const Tensor& input, const Tensor& weight, const Tensor& bias, bool tanh,
                                      const Tensor& pre_activation, const Tensor& output))
// grad_pre (rows, in) = (grad_output (rows, out) @ weight (out, in)) * gelu'(pre_activation
// (rows, in)) and grad_bias (in) = grad_pre summed over rows: the backward of a linear layer
// that follows a gelu, through the gelu and its bias in one call (on CUDA the unfused
// steps: cuda/linear_gelu.cpp says why). grad_bias may be undefined (not wanted); all
// contiguous, one dtype; grad_pre and grad_bias are overwritten.
MG_KERNEL(linear_gelu_backward, void, (const Tensor& grad_output, const Tensor& weight,
                                       const Tensor& pre_activation, bool tanh, const Tensor& grad_pre,
                                       const Tensor& grad_bias))
// softmax or log_softmax along dim; input and output contiguous.
MG_KERNEL(softmax, void, (const Tensor& input, int dim, bool log, const Tensor& output))
// grad_input from grad_output and the forward's output; all contiguous.
MG_KERNEL(softmax_backward, void, (const Tensor& grad_output, const Tensor& output, int dim, bool log,
                                   const Tensor& grad_input))
// loss[n] = -weight * log_probs[n, target[n]], 0 where target == ignore_index;
// log_probs (N, C) contiguous, target (N) int64.
MG_KERNEL(nll_forward, void, (const Tensor& log_probs, const Tensor& target, int64_t ignore_index,
                              const Tensor& loss))
// grad_input (N, C) zero except grad_input[n, target[n]] = -grad_loss[n].
MG_KERNEL(nll_backward, void, (const Tensor& grad_loss, const Tensor& target, int64_t ignore_index,
                               const Tensor& grad_input))
// Cross entropy of logits (N, C) contiguous against target (N) int64 with label smoothing
// s, in one pass: log_sum_exp[n] = log sum_c exp(logits[n, c]) (float32; float64 for
// float64 logits) and loss[n] = log_sum_exp[n] - (1 - s) logits[n, target[n]]
// - s mean_c logits[n, c], 0 where target == ignore_index. loss (N) has the logits' dtype,
// or float32 for float16/bfloat16 logits (autocast's float32 loss, computed from the
// 16-bit logits as they are: no float32 copy of an (N, C) matrix).
MG_KERNEL(cross_entropy_forward, void, (const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                        double label_smoothing, const Tensor& loss, const Tensor& log_sum_exp))
// grad_logits[n, c] = grad_loss[n] (softmax(logits)[n, c] - (1 - s) [c == target[n]] - s / C)
// from the forward's log_sum_exp; rows where target == ignore_index are 0. grad_loss (N)
// contiguous, in the forward's loss dtype; grad_logits in the logits' dtype.
MG_KERNEL(cross_entropy_backward, void, (const Tensor& grad_loss, const Tensor& logits,
                                         const Tensor& log_sum_exp, const Tensor& target, int64_t ignore_index,
                                         double label_smoothing, const Tensor& grad_logits))
// mask (bool) = uniform >= p; output = input * mask / (1 - p).
MG_KERNEL(dropout, void, (const Tensor& input, double p, PhiloxState rng, const Tensor& mask,
                          const Tensor& output))
// output = grad * mask * scale
MG_KERNEL(masked_scale, void, (const Tensor& grad, const Tensor& mask, double scale, const Tensor& output))
// Fills with uniform [low, high) or normal(mean, std) numbers from Philox.
MG_KERNEL(fill_uniform, void, (const Tensor& destination, double low, double high, PhiloxState rng))
MG_KERNEL(fill_normal, void, (const Tensor& destination, double mean, double std, PhiloxState rng))
// Fused optimizer updates in place, as torch.optim computes them. Each takes lists
// (element i of each belongs to params[i]; all of one device and dtype) so that a device
// can update every parameter in a few launches (multi-tensor). All tensors contiguous, a
// state tensor of its parameter's dtype and numel;
// each `step` is a distinct one-element float32 counter that the kernel increments and
// reads on the device (no host sync). An optional list (momentum_buffers without
// momentum, max_exp_avg_sqs without amsgrad) is empty; SGD's hyper.first_step applies to
// every parameter of the call.
MG_KERNEL(sgd_step, void, (std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<const Tensor> momentum_buffers, const SgdHyper& hyper))
MG_KERNEL(adam_step, void, (std::span<const Tensor> params, std::span<const Tensor> grads,
                            std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                            std::span<const Tensor> max_exp_avg_sqs, std::span<const Tensor> steps,
                            const AdamHyper& hyper))
// Adam/AdamW with 8-bit moments (optim/adam_8bit.h), one fused pass per quantisation block:
// dequantise, adam_element (hyper.amsgrad false), new absmax, requantise
// (core/quantize_8bit.h; exp_avg in the signed map, exp_avg_sq in the unsigned one).
// exp_avg_codes[i] and exp_avg_sq_codes[i] are uint8 of params[i]'s sizes, dense in its
// layout; exp_avg_absmaxes[i] and exp_avg_sq_absmaxes[i] are 1-d float32 with one value
// per block of block_size consecutive elements in memory order (ceil(numel / block_size));
// all overwritten. block_size in quantize_8bit.h's [kMinBlockSize, kMaxBlockSize]. params of
// one device and dtype (float32, float64, float16, bfloat16: the update is computed in the
// compute type, the moments' quantisation in float32). steps, hyper.found_inf and
// hyper.lr_on_device as adam_step's.
MG_KERNEL(adam_8bit_step, void, (std::span<const Tensor> params, std::span<const Tensor> grads,
                                 std::span<const Tensor> exp_avg_codes, std::span<const Tensor> exp_avg_sq_codes,
                                 std::span<const Tensor> exp_avg_absmaxes,
                                 std::span<const Tensor> exp_avg_sq_absmaxes, std::span<const Tensor> steps,
                                 const AdamHyper& hyper, int64_t block_size))
MG_KERNEL(adagrad_step, void, (std::span<const Tensor> params, std::span<const Tensor> grads,
                               std::span<const Tensor> state_sums, std::span<const Tensor> steps,
                               const AdagradHyper& hyper))
// Mixed-precision loss scaling (amp/grad_scaler.h), as torch's
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_. found_inf and scale
// are 0-d float32, growth_tracker 0-d int32, all on the tensors' device.
// non_finite_check_and_unscale multiplies every gradient of `grads` (one device, each
// dense, any floating dtypes, mixed) in place by *inv_scale (0-d float32, or float64),
// computing in the gradient's compute type (float32 for 16-bit ones), and sets
// *found_inf = 1 if any element was inf or NaN before scaling; it never clears found_inf
// (the caller zeroes it first). With found_inf undefined it only scales, as torch's
// _foreach_mul_ by a tensor: clip_grad_norm_'s coefficient.
MG_KERNEL(non_finite_check_and_unscale, void, (std::span<const Tensor> grads, const Tensor& found_inf,
                                               const Tensor& inv_scale))
// After an overflow (*found_inf != 0): scale *= backoff_factor, growth_tracker = 0. Else
// growth_tracker += 1, and on reaching growth_interval scale *= growth_factor (unless
// that would overflow float32) and growth_tracker = 0.
MG_KERNEL(update_scale, void, (const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                               double growth_factor, double backoff_factor, int64_t growth_interval))
// The total p-norm of a list of tensors before its root (clip_grad_norm_; torch's
// _foreach_norm, summed over the list): result (0-d) = the sum over every element x of
// `tensors` of |x|^p, or max |x| for p = inf; NaN propagates. p > 0. tensors: one device,
// each dense, any floating dtypes (mixed), empty ones allowed. result and partials are
// float32, float64 when any tensor is float64. partials (1-D, any length >= 1) is scratch
// the caller allocates, so that every device allocates alike: the CUDA kernel runs at
// most that many blocks, each keeping one partial there, and combines them in a fixed
// order without atomics, so the same list gives the same bits every run.
MG_KERNEL(total_norm_power, void, (std::span<const Tensor> tensors, double p, const Tensor& partials,
                                   const Tensor& result))
// 2-D convolution: input (N, C, H, W), weight (K, C/groups, R, S), bias (K) contiguous or
// undefined, output (N, K, P, Q). Each 4-D tensor is dense in NCHW or in channels_last,
// independently of the others (autograd/conv.cpp allocates results in the layout PyTorch
// would: channels_last if the input or weight is). Every entry overwrites its result,
// except conv2d_backward_input with `accumulate`, which adds the input's gradient to what
// grad_input holds (autograd/conv.cpp: where the gradient of the same input from another
// branch is already there, autograd/engine.h's take_delivered_gradient).
MG_KERNEL(conv2d, void, (const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
                         const Tensor& output))
MG_KERNEL(conv2d_backward_input, void, (const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                        const Tensor& grad_input, bool accumulate))
MG_KERNEL(conv2d_backward_weight, void, (const Tensor& grad_output, const Tensor& input, const Window2d& window,
                                         const Tensor& grad_weight))
// conv2d without bias that also writes batch norm's statistics of the output (sum and
// square_sum: (K) float32, over (N, P, Q)) where the device computes them in the same
// kernel (CUDA: cuDNN, cuda/cudnn/conv.h). false, with nothing written, where it does
// not; the caller then runs conv2d.
MG_KERNEL(conv2d_with_statistics, bool, (const Tensor& input, const Tensor& weight, const Window2d& window,
                                         const Tensor& output, const Tensor& sum, const Tensor& square_sum))
// conv2d_backward_input (overwriting) for a convolution whose input was
// relu(batch_norm(bn_input)) in training, with the ReLU's backward and batch norm's
// backward sums in the same kernel where the device can (CUDA: cuDNN, 16-bit data dense
// in channels_last, cuda/cudnn/conv.h): grad_input is the input's gradient masked where
// batch norm's output (rebuilt from bn_input, mean, invstd, bn_weight, bn_bias, as
// batch_norm saved them, all four (C) float32) is not positive; grad_bn_weight and
// grad_bn_bias (C, float32) batch norm's weight and bias gradients; coefficients (3, C)
// float32 what batch_norm_backward_from_coefficients reads. false, with nothing written,
// where it cannot; the caller then runs conv2d_backward_input and batch_norm_backward.
MG_KERNEL(conv2d_backward_input_relu_batch_norm, bool, (const Tensor& grad_output, const Tensor& weight,
                                                        const Window2d& window, const Tensor& bn_input,
                                                        const Tensor& mean, const Tensor& invstd,
                                                        const Tensor& bn_weight, const Tensor& bn_bias,
                                                        const Tensor& grad_input, const Tensor& coefficients,
                                                        const Tensor& grad_bn_weight,
                                                        const Tensor& grad_bn_bias))
// Pooling, (N, C, H, W) tensors each dense in NCHW or channels-last order (outputs in the
// input's layout, window_indices in the output's, grad_output in grad_input's).
// max_pool2d keeps, per output, the position of the maximum inside its window as one
// uint8 (kernel_h * kernel_w <= 256): 1 byte instead of 8.
MG_KERNEL(max_pool2d, void, (const Tensor& input, const Window2d& window, const Tensor& output,
                             const Tensor& window_indices))
MG_KERNEL(max_pool2d_backward, void, (const Tensor& grad_output, const Tensor& window_indices,
                                      const Window2d& window, const Tensor& grad_input))
MG_KERNEL(avg_pool2d, void, (const Tensor& input, const Window2d& window, const Tensor& output))
MG_KERNEL(avg_pool2d_backward, void, (const Tensor& grad_output, const Window2d& window,
                                      const Tensor& grad_input))
// Batch normalisation over (N, H, W) per channel of an (N, C, H, W) input dense in NCHW
// or channels-last order, or a contiguous (N, C) one; output, grad_output and grad_input
// (and residual, the forward's output and grad_residual when given) share the input's
// sizes, dtype and layout. Training:
// normalise with the batch statistics, write save_mean / save_invstd (C, float32 for
// 16-bit inputs, else the input's dtype) and update running_mean / running_var in place
// (unbiased variance, momentum as PyTorch); eval: normalise with the running statistics.
// weight and bias (C) may be undefined (affine=false). relu: output relu(y) instead of y.
// residual (only with relu; or undefined): output relu(y + residual), the residual read in
// the same pass as x (a ResNet block's end).
// NOTE: with relu and no residual, training computes y from the statistics as saved
// (rounded to their dtype), as y = (x - save_mean) * (save_invstd * weight) + bias, so
// that the backward can rebuild the ReLU's mask (y > 0) from the input exactly. With a
// residual the mask cannot be rebuilt from the input; the backward reads the output.
// statistics (training only; or undefined): the input's per-channel sum and sum of
// squares, made by whoever made the input (conv2d_with_statistics): the statistics pass
// over the input is skipped, and the variance is E[x^2] - E[x]^2 (clamped at 0) of them.
// num_batches_tracked (training only; or undefined): a 0-d int64 counter on the input's
// device, incremented by one by the same launch that updates the running statistics (a
// launch of its own would be one more per layer per step: 53 in a ResNet-50 step).
MG_KERNEL(batch_norm, void, (const Tensor& input, const Tensor& weight, const Tensor& bias,
                             const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& num_batches_tracked, bool training, double momentum, double eps,
                             bool relu, const Tensor& residual, const ChannelSums& statistics,
                             const Tensor& output, const Tensor& save_mean, const Tensor& save_invstd))
// Training-mode backward from the saved statistics; grad_weight / grad_bias may be
// undefined when not needed. relu: the forward ran with relu and grad_output is taken as
// the ReLU's. Its mask is output > 0 when output (the forward's, which had a residual) is
// given, else it is rebuilt from the input (bias is then read). grad_residual (only with
// output; or undefined): receives grad_output through the mask, the gradient reaching
// y + residual and so the residual's; it must be given with output whenever grad_input
// is wanted (the CUDA kernels write it while summing and read it back for grad_input
// instead of grad_output and output). It may be grad_output itself: every element is
// read before it is overwritten.
MG_KERNEL(batch_norm_backward, void, (const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                      const Tensor& bias, const Tensor& save_mean, const Tensor& save_invstd,
                                      bool relu, const Tensor& output, const Tensor& grad_input,
                                      const Tensor& grad_weight, const Tensor& grad_bias,
                                      const Tensor& grad_residual))
// batch_norm_backward's grad_input from per-channel coefficients another kernel formed
// (conv2d_backward_input_relu_batch_norm): grad_input = coefficients[0][c] * grad +
// coefficients[1][c] * input + coefficients[2][c], with grad (the gradient reaching batch
// norm's output, already masked by its ReLU), input and grad_input of one dtype and
// layout (NCHW or channels-last, as batch_norm's), coefficients (3, C) float32.
MG_KERNEL(batch_norm_backward_from_coefficients, void, (const Tensor& grad, const Tensor& input,
                                                        const Tensor& coefficients, const Tensor& grad_input))

// ---- transformers ----
// output (N, D) row n = weight (V, D) row indices[n]; indices (N) int64, all contiguous.
// On the CPU the caller has checked every index against [0, V). On CUDA the kernel checks
// them itself (a host check would synchronise): an index outside the range writes a zero
// row and is reported by cuda/device_error.h as an mg::Error at the next synchronisation.
MG_KERNEL(embedding, void, (const Tensor& weight, const Tensor& indices, const Tensor& output))
// grad_weight (V, D) += grad_output (N, D) row n at row indices[n] for every n whose index
// is not padding_idx (-1: none); grad_weight starts as zeros (the caller's). Deterministic
// on the CPU (rows summed in order of n).
MG_KERNEL(embedding_backward, void, (const Tensor& grad_output, const Tensor& indices, int64_t padding_idx,
                                     const Tensor& grad_weight))
// Layer normalisation of each row of input (rows, cols), all contiguous: output =
// (x - mean) * invstd * weight + bias, weight and bias (cols) or undefined; save_mean and
// save_invstd (rows) are float32 (float64 for a float64 input). One pass over the data
// each way on the GPU. With `residual` defined (rows, cols; the input's dtype, or a 16-bit
// one with a float32 input), x = input + residual, which is also written to `sum` (rows,
// cols, the input's dtype): a pre-norm transformer's residual add in the same pass.
MG_KERNEL(layer_norm, void, (const Tensor& input, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                             double eps, const Tensor& sum, const Tensor& output, const Tensor& save_mean,
                             const Tensor& save_invstd))
// grad_input (rows, cols) from the saved statistics, plus grad_sum (rows, cols, the
// input's dtype) where defined: the gradient that reached the residual add's result
// otherwise; grad_weight / grad_bias (cols, the weight's dtype) may be undefined when not
// needed; each result is overwritten.
MG_KERNEL(layer_norm_backward, void, (const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                      const Tensor& save_mean, const Tensor& save_invstd, const Tensor& grad_sum,
                                      const Tensor& grad_input, const Tensor& grad_weight,
                                      const Tensor& grad_bias))
// output = mask ? value : input; mask (bool) and input broadcast to output's sizes
// (stride-0 views), any strides; output contiguous.
MG_KERNEL(masked_fill, void, (const Tensor& input, const Tensor& mask, double value, const Tensor& output))
// The k largest (or smallest) entries of each row of input (rows, n), contiguous, sorted
// (largest first when largest, else smallest first; equal values by lower index first;
// NaN counts as larger than any number), into values (rows, k) and int64 indices (rows, k).
MG_KERNEL(topk, void, (const Tensor& input, int64_t k, bool largest, const Tensor& values,
                       const Tensor& indices))
// num_samples category indices per row of probs (rows, n), contiguous non-negative weights
// (not necessarily normalised; each row's sum > 0, checked by the caller on the CPU), into
// output (rows, num_samples) int64. With replacement, draw s of row r reads Philox block
// r * num_samples + s; without, every category of row r gets block r * n + j and the
// num_samples categories with the largest keys u^(1/w) are taken (each category at most
// once; zero weights only after all positive ones). The caller reserves the blocks.
MG_KERNEL(multinomial, void, (const Tensor& probs, int64_t num_samples, bool replacement, PhiloxState rng,
                              const Tensor& output))
// ---- indexing (autograd/indexing.cpp) ----
// output[p] = input[p with its coordinate along dim replaced by index[p]] for every
// position p of output (PyTorch's gather; index_select is a gather whose index is a
// broadcast view of the 1-d index). index int64 of output's sizes, output and input of
// its rank, input at least as large in every dim but dim; any strides (stride 0 where
// broadcast), any dtype (output's = input's). On the CPU the caller has checked every
// index against [0, input.size(dim)); on CUDA the kernel checks them itself, writes a
// zero for a bad one and reports it through cuda/device_error.h, as embedding does.
MG_KERNEL(gather, void, (const Tensor& input, int dim, const Tensor& index, const Tensor& output))
// destination[p with its coordinate along dim replaced by index[p]] += source[p] for
// every position p of source (PyTorch's scatter_add_): gather's gradient. source
// floating, any strides; index int64 of source's sizes, any strides; destination of
// their rank, any strides, float64 for a float64 source, else float32 (a 16-bit
// gradient is summed unrounded, then converted once by the caller). Deterministic on the
// CPU (each destination element summed in order of position); atomic on CUDA. Indices as
// gather's (a bad one is skipped on CUDA: gather has reported it).
MG_KERNEL(scatter_add, void, (const Tensor& source, int dim, const Tensor& index, const Tensor& destination))
// Fused attention (see AttentionParams): q (B, H, Tq, D), k and v (B, H, Tk, D), output
// (B, H, Tq, D), each with unit stride in the last dim and any other strides (views of one
// packed projection are read in place); log_sum_exp (B, H, Tq) contiguous, float32
// (float64 for a float64 input): log sum_j exp(scale * q_i . k_j) over the keys row i
// attends to (before dropout).
// On CUDA: float16 / bfloat16 with D <= 128 and a multiple of 8 (tensor cores), float32
// with any D <= 128 (FP32 FMA: no TF32, as PyTorch's float32 default); on the CPU: any
// floating type.
MG_KERNEL(attention_forward, void, (const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionParams& params, const Tensor& output,
                                    const Tensor& log_sum_exp))
// The three gradients from the forward's output and log_sum_exp (the (Tq, Tk) matrix is
// recomputed tile by tile); grad_output has output's sizes, grad_q/k/v q/k/v's, each with
// unit stride in the last dim and any other strides; grad_q/k/v are overwritten.
MG_KERNEL(attention_backward, void, (const Tensor& grad_output, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& output, const Tensor& log_sum_exp,
                                     const AttentionParams& params, const Tensor& grad_q, const Tensor& grad_k,
                                     const Tensor& grad_v))

#undef MG_KERNEL
#endif  // MG_KERNEL
