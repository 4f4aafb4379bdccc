// autograd/norm.cpp — batch_norm, batch_norm_relu and batch_norm_add_relu, forward and backward.
//
// Inputs dense in NCHW or channels-last order go to the kernels as they are, and the
// output and the input's gradient take the input's layout (as in PyTorch), so a
// channels-last network stays channels-last without copies.
//
// Training: one kernel computes the batch statistics, normalises, and updates the running
// statistics and the batch counter (num_batches_tracked) in place (they are buffers, never
// differentiated, so only their version is bumped). One node, BatchNormBackward, saves
// the input, the weight and the two per-channel statistics (mean, 1/std): 2 * C extra
// values instead of a normalised copy of the input.
// batch_norm_relu's node (BatchNormReluBackward) saves the bias too: the kernels apply the
// ReLU to the output and, in backward, rebuild its mask from the input with the forward's
// own arithmetic, so the mask is exact and the ReLU's output is never saved. A convolution
// consuming its output may form its backward sums in its own backward kernel and hand them
// over (autograd/relu_batch_norm_node.h): the node's backward is then one pass.
// batch_norm_add_relu's (BatchNormAddReluBackward) adds the residual in the same pass, so
// batch_norm's output is never written; the mask of relu(y + residual) cannot be rebuilt
// from the input, so it saves its output instead of the bias (the next block's input,
// saved by it anyway, as PyTorch's relu saves its output). Its backward writes the masked
// gradient once, as the residual's gradient, and batch_norm's backward reads it back.
//
// Evaluation: the statistics are constants, so y = (x - running_mean) * invstd * w + b is
// an affine map per channel. Without gradients the kernel computes it directly (no
// intermediates); with gradients it is built from mul/sub/add, whose backward is already
// right, at the cost of the intermediates those ops save.
#include "memgrad/autograd/norm.h"

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/relu_batch_norm_node.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/memory/context.h"

namespace mg {

namespace {

void check_per_channel(const char* op, const char* what, const Tensor& values, const Tensor& input,
                       int64_t channels) {
  if (!values.defined()) return;
  MG_CHECK(values.dim() == 1 && values.numel() == channels, op, ": expected ", what, " of shape [", channels,
           "] (one value per channel of the input of shape ", input.sizes(), "), got shape ", values.sizes(),
           ". Hint: size it with the input's dim 1.");
  autograd::check_floating(op, values);
  autograd::check_same_device(op, input, values);
  MG_CHECK(values.is_contiguous(), op, ": expected a contiguous ", what, ", got strides ", values.strides(),
           ". Hint: call .contiguous() on it.");
}

// Given statistics: both or neither, float32 (C) each, contiguous, on the input's device.
void check_statistics(const char* op, const ChannelSums& statistics, const Tensor& input, int64_t channels) {
  MG_CHECK(statistics.sum.defined() == statistics.square_sum.defined(), op,
           ": expected the statistics' sum and square_sum both given or both undefined.");
  if (!statistics.defined()) return;
  for (const Tensor* sums : {&statistics.sum, &statistics.square_sum}) {
    MG_CHECK(sums->dtype() == DType::Float32 && sums->dim() == 1 && sums->numel() == channels &&
                 sums->is_contiguous(),
             op, ": expected the statistics as contiguous float32 tensors of shape [", channels,
             "] (one sum per channel of the input of shape ", input.sizes(), "), got ", sums->dtype(), " of shape ",
             sums->sizes(), ". Hint: pass what conv2d_with_statistics returns, or none.");
    autograd::check_same_device(op, input, *sums);
  }
}

// A given counter: one int64 on the input's device, where the kernel increments it.
void check_counter(const char* op, const Tensor& num_batches_tracked, const Tensor& input) {
  if (!num_batches_tracked.defined()) return;
  MG_CHECK(num_batches_tracked.dtype() == DType::Int64 && num_batches_tracked.dim() == 0, op,
           ": expected num_batches_tracked as a 0-d int64 tensor, got ", num_batches_tracked.dtype(), " of shape ",
           num_batches_tracked.sizes(), ". Hint: pass nn::BatchNorm2d's buffer, made by zeros(Shape{}, {.dtype = "
           "DType::Int64}), or none.");
  MG_CHECK(num_batches_tracked.device() == input.device(), op, ": expected num_batches_tracked on the input's device ",
           input.device(), ", got ", num_batches_tracked.device(),
           " (the kernel that updates the running statistics increments it). Hint: move it with .to(",
           input.device(), "), as Module::to does with the layer's buffers.");
}

// (C) -> (1, C) or (1, C, 1, 1): broadcastable against the input.
Tensor per_channel_view(const Tensor& values, int rank) {
  Shape sizes = rank == 2 ? Shape{1, values.numel()} : Shape{1, values.numel(), 1, 1};
  return reshape(values, sizes);
}

// Evaluation with gradients: differentiable composite of elementwise ops.
Tensor batch_norm_eval_composite(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                                 const Tensor& weight, const Tensor& bias, double eps) {
  Tensor invstd;
  {
    NoGradGuard no_grad;  // the running statistics are constants here
    invstd = rdiv(1.0, sqrt(add(running_var.detach(), eps)));
  }
  int rank = input.dim();
  Tensor out = mul(sub(input, per_channel_view(running_mean.detach(), rank)), per_channel_view(invstd, rank));
  if (weight.defined()) out = mul(out, per_channel_view(weight, rank));
  if (bias.defined()) out = add(out, per_channel_view(bias, rank));
  // float32 statistics promote a 16-bit input's result; give the caller its own dtype back.
  return out.dtype() == input.dtype() ? out : out.to(input.dtype());
}

void check_residual(const char* op, const Tensor& input, const Tensor& residual) {
  MG_CHECK(residual.defined(), op, ": got an undefined residual. Hint: without a shortcut, use batch_norm_relu.");
  MG_CHECK(residual.sizes() == input.sizes(), op, ": expected a residual of the input's shape ", input.sizes(),
           ", got shape ", residual.sizes(),
           " (it is not broadcast). Hint: map the shortcut onto the block's output first, as a ResNet's "
           "downsample does.");
  MG_CHECK(is_floating(residual.dtype()), op, ": expected a floating-point residual, got ", residual.dtype(),
           " of shape ", residual.sizes(), ". Hint: convert it with .to(", input.dtype(), ").");
  MG_CHECK(residual.device() == input.device(), op, ": expected the residual on the input's device ",
           input.device(), ", got ", residual.device(), " (shape ", residual.sizes(),
           "). Hint: move it with .to(device).");
}

// Whether the kernels add the residual: in training, with the input's dtype, and with the
// input's memory order as the kernels read it (they index both with one layout). The rest
// (evaluation, mixed dtypes or layouts) is add_relu of batch_norm, whose result it is by
// definition; evaluation stays there so that it equals the unfused ops exactly.
bool fuses_residual(const Tensor& x, const Tensor& residual, bool training) {
  if (!training || residual.dtype() != x.dtype()) return false;
  MemoryFormat format = suggest_memory_format(x);
  if (!is_contiguous_in(x, format)) format = MemoryFormat::Contiguous;  // dense_layout's copy
  return is_contiguous_in(residual, format);
}

// The backward of the three ops in training (see the file's header): batch norm's input,
// weight and bias gradients (and the residual's, when one was added) from the saved tensors.
std::vector<Tensor> normalise_backward(const autograd::Node& node, const Tensor& grad, DType bias_dtype, bool relu,
                                       const Tensor& saved_input, const Tensor& saved_weight, const Tensor& saved_bias,
                                       const Tensor& saved_mean, const Tensor& saved_invstd,
                                       const Tensor& saved_output) {
  // The kernel indexes grad_output, the output and the gradients with the input's layout.
  MemoryFormat format = suggest_memory_format(saved_input);
  const bool added = saved_output.defined();
  // NOTE: with a residual, the masked gradient is written over grad_output when the
  // node has it to itself (in_format's copy, or an incoming buffer nothing else
  // holds), so that the node allocates one activation-sized buffer (grad_input), not
  // two: ResNet-50 b128 float32's predicted peak is 52 MB lower (234 MB with
  // --checkpoint).
  const bool overwrite = added && (!is_contiguous_in(grad, format) || autograd::sole_owner(grad));
  Tensor grad_output = autograd::in_format(grad, format);
  Tensor output = added ? autograd::in_format(saved_output, format) : Tensor();
  int64_t channels = saved_input.sizes()[1];
  TensorOptions like_input{.dtype = saved_input.dtype(), .device = grad.device()};
  Tensor grad_input, grad_weight, grad_bias, grad_residual;
  if (node.needs_input_grad(0)) grad_input = empty(saved_input.sizes(), like_input, format);
  if (node.needs_input_grad(1)) grad_weight = autograd::new_output({channels}, saved_weight.dtype(), grad);
  if (node.needs_input_grad(2)) grad_bias = autograd::new_output({channels}, bias_dtype, grad);
  // The masked gradient: the residual's, and what grad_input is computed from.
  if (added && (grad_input.defined() || node.needs_input_grad(3))) {
    grad_residual = overwrite ? grad_output : empty(saved_input.sizes(), like_input, format);
  }
  kernels(grad.device()).batch_norm_backward(grad_output, saved_input, saved_weight, saved_bias, saved_mean,
                                             saved_invstd, relu, output, grad_input, grad_weight,
                                             grad_bias, grad_residual);
  std::vector<Tensor> gradients{grad_input, grad_weight, grad_bias};
  if (added) gradients.push_back(node.needs_input_grad(3) ? grad_residual : Tensor());
  return gradients;
}

// batch_norm_relu's node in training: the backward above, or, where the convolution that
// consumed the output formed batch norm's backward sums in its own kernel and handed them
// over (autograd/relu_batch_norm_node.h), one pass from them.
class BatchNormReluNode final : public autograd::ReluBatchNormNode {
 public:
  BatchNormReluNode(autograd::SavedTensors<5>&& saved, DType bias_dtype)
      : ReluBatchNormNode("BatchNormReluBackward"), saved_(std::move(saved)), bias_dtype_(bias_dtype) {}

  Saved saved_for_consumer() override {
    const auto unpacked = unpack();
    return {unpacked[0], unpacked[3], unpacked[4], unpacked[1], unpacked[2]};
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    const auto [input, weight, bias, mean, invstd] = unpack();
    const HandedSums sums = take_handed_sums();
    if (!sums.coefficients.defined()) {
      return normalise_backward(*this, grad_outputs[0], bias_dtype_, /*relu=*/true, input, weight, bias, mean,
                                invstd, Tensor());
    }
    // The handed gradient is masked already; the sums are float32, as is a 16-bit input's
    // weight and bias (the only kind the fused kernels take). The Recorder shows this path
    // by its op name.
    memory::OpScope scope("BatchNormReluBackward[from the convolution's sums]");
    Tensor grad_input;
    if (needs_input_grad(0)) {
      const MemoryFormat format = suggest_memory_format(input);
      grad_input = empty(input.sizes(), {.dtype = input.dtype(), .device = input.device()}, format);
      kernels(input.device())
          .batch_norm_backward_from_coefficients(autograd::in_format(grad_outputs[0], format), input,
                                                 sums.coefficients, grad_input);
    }
    return {grad_input, needs_input_grad(1) ? sums.grad_weight : Tensor(),
            needs_input_grad(2) ? sums.grad_bias : Tensor()};
  }

  void release_saved() override {
    for (autograd::SavedTensor& tensor : saved_.tensors) tensor.release();
  }

 private:
  // input, weight, bias, mean, invstd
  std::array<Tensor, 5> unpack() const {
    std::array<Tensor, 5> unpacked;
    for (size_t i = 0; i < unpacked.size(); ++i) unpacked[i] = saved_.tensors[i].unpack(name());
    return unpacked;
  }

  autograd::SavedTensors<5> saved_;
  DType bias_dtype_;
};

// batch_norm, then a ReLU when `relu`, with `residual` (or undefined) added before it.
Tensor normalise(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                 const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps, bool relu,
                 const Tensor& residual, const ChannelSums& statistics, const Tensor& num_batches_tracked) {
  autograd::check_defined(op, x);
  autograd::check_floating(op, x);
  MG_CHECK(x.dim() == 2 || x.dim() == 4, op, ": expected a 2-D (N, C) or 4-D (N, C, H, W) input, got shape ",
           x.sizes(), ". Hint: reshape other layouts to (N, C, H, W).");
  const int64_t channels = x.sizes()[1];
  check_per_channel(op, "weight", weight, x, channels);
  check_per_channel(op, "bias", bias, x, channels);
  check_per_channel(op, "running_mean", running_mean, x, channels);
  check_per_channel(op, "running_var", running_var, x, channels);
  MG_CHECK(running_mean.defined() == running_var.defined(), op,
           ": expected running_mean and running_var both given or both undefined. Hint: track both or neither.");
  MG_CHECK(momentum >= 0 && momentum <= 1, op, ": expected momentum in [0, 1], got ", momentum);
  MG_CHECK(eps >= 0, op, ": expected a non-negative eps, got ", eps);
  check_statistics(op, statistics, x, channels);
  check_counter(op, num_batches_tracked, x);
  const int64_t per_channel = channels > 0 ? x.numel() / channels : 0;
  if (training) {
    MG_CHECK(per_channel > 1, op, ": expected more than 1 value per channel when training, got input of shape ",
             x.sizes(), ". Hint: use a batch larger than 1, or evaluation mode.");
  } else {
    MG_CHECK(running_mean.defined(), op,
             ": evaluation mode needs running_mean and running_var, got undefined ones for input of shape ",
             x.sizes(), ". Hint: pass training=true, or track running statistics.");
  }
  if (residual.defined() && !fuses_residual(x, residual, training)) {
    return add_relu(normalise(op, x, running_mean, running_var, weight, bias, training, momentum, eps,
                              /*relu=*/false, Tensor(), statistics, num_batches_tracked),
                    residual);
  }
  if (!training && autograd::needs_grad(x, weight, bias)) {
    Tensor out = batch_norm_eval_composite(x, running_mean, running_var, weight, bias, eps);
    return relu ? mg::relu(out) : out;
  }

  // NCHW and channels-last inputs are read in place; the output keeps the input's layout.
  Tensor input = autograd::dense_layout(x);
  Tensor out = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()}, suggest_memory_format(input));
  // 16-bit inputs keep their statistics in float32, as PyTorch does.
  DType stats_dtype = is_16_bit_float(x.dtype()) ? DType::Float32 : x.dtype();
  Tensor save_mean, save_invstd;
  if (training) {
    save_mean = autograd::new_output({channels}, stats_dtype, x);
    save_invstd = autograd::new_output({channels}, stats_dtype, x);
  }
  const Tensor counter = training ? num_batches_tracked : Tensor();
  kernels(x.device()).batch_norm(input, weight, bias, running_mean, running_var, counter, training, momentum, eps,
                                 relu, residual, training ? statistics : ChannelSums{}, out, save_mean, save_invstd);
  if (training && running_mean.defined()) {
    running_mean.bump_version();
    running_var.bump_version();
  }
  if (counter.defined()) counter.bump_version();
  if (!training) return out;  // gradients were handled by the composite above

  if (autograd::needs_grad(x, weight, bias, residual)) {
    const bool added = residual.defined();
    std::vector<Tensor> inputs = {x, weight, bias};
    if (added) inputs.push_back(residual);
    DType bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
    if (relu && !added) {
      // The ReLU's mask is rebuilt from the input with the bias.
      autograd::connect(std::make_shared<BatchNormReluNode>(
                            autograd::saved(input, weight, bias, save_mean, save_invstd), bias_dtype),
                        out, inputs);
      return out;
    }
    // After a residual, the ReLU's mask is read from the output.
    autograd::record(added ? "BatchNormAddReluBackward" : "BatchNormBackward", out, inputs,
                     autograd::saved(input, weight, Tensor(), save_mean, save_invstd, added ? out : Tensor()),
                     [bias_dtype, relu](const autograd::Node& node, const Tensor& grad, const Tensor& saved_input,
                                        const Tensor& saved_weight, const Tensor& saved_bias,
                                        const Tensor& saved_mean, const Tensor& saved_invstd,
                                        const Tensor& saved_output) {
                       return normalise_backward(node, grad, bias_dtype, relu, saved_input, saved_weight,
                                                 saved_bias, saved_mean, saved_invstd, saved_output);
                     });
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, const ChannelSums& statistics,
                  const Tensor& num_batches_tracked) {
  return normalise("batch_norm", input, running_mean, running_var, weight, bias, training, momentum, eps,
                   /*relu=*/false, Tensor(), statistics, num_batches_tracked);
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                       const ChannelSums& statistics, const Tensor& num_batches_tracked) {
  return normalise("batch_norm_relu", input, running_mean, running_var, weight, bias, training, momentum, eps,
                   /*relu=*/true, Tensor(), statistics, num_batches_tracked);
}

Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum, double eps, const ChannelSums& statistics,
                           const Tensor& num_batches_tracked) {
  const char* op = "batch_norm_add_relu";
  autograd::check_defined(op, input);
  check_residual(op, input, residual);
  return normalise(op, input, running_mean, running_var, weight, bias, training, momentum, eps, /*relu=*/true,
                   residual, statistics, num_batches_tracked);
}

}  // namespace mg
