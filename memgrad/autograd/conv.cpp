// autograd/conv.cpp — conv2d in NCHW or channels_last, forward and backward side by side.
//
// The device kernels (core/cpu/conv.cpp, cuda/kernels/conv.cu and cuda/cudnn/) do the
// arithmetic on tensors dense in NCHW or channels_last; this file checks the arguments,
// sizes the output, and records one Conv2dBackward node. Layouts follow PyTorch: the
// output is channels_last when the input or the weight is, and each gradient comes back in
// the layout of the tensor it belongs to. A tensor dense in neither layout (an arbitrary
// view) is copied to one first. The node saves only what the requested gradients need:
// grad_input needs the weight, grad_weight needs the input, grad_bias needs neither.
// grad_input is added in place to the gradient another consumer of the input delivered
// first, where the engine hands that over (autograd/engine.h, take_delivered_gradient).
// The weight's gradient may run on the backward's side stream (autograd/side_stream.h).
// Where the input is batch_norm_relu's output, the backward data may also form batch
// norm's backward sums for it (autograd/relu_batch_norm_node.h).
// conv2d_with_statistics is the same op with batch norm's statistics of the output made
// in the same kernel where the device can (the kernel table's conv2d_with_statistics).
// A selective checkpoint keeping OpKind::Convolution keeps the output and those statistics.
#include "memgrad/autograd/conv.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/relu_batch_norm_node.h"
#include "memgrad/autograd/selective_checkpoint.h"
#include "memgrad/autograd/side_stream.h"
#include "memgrad/memory/context.h"

namespace mg {

using autograd::needs_grad;
using autograd::Node;

namespace {

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : contiguous_copy(x); }

// `x` itself when dense in NCHW or channels_last (what the kernels take), else a copy in
// `format`.
Tensor dense(const Tensor& x, MemoryFormat format) {
  bool is_dense = x.is_contiguous() || is_contiguous_in(x, MemoryFormat::ChannelsLast);
  return is_dense ? x : contiguous_copy(x, format);
}

// The layout of conv2d's output: channels_last when the input or the weight is.
MemoryFormat output_format(const Tensor& input, const Tensor& weight) {
  bool channels_last = suggest_memory_format(input) == MemoryFormat::ChannelsLast ||
                       suggest_memory_format(weight) == MemoryFormat::ChannelsLast;
  return channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

// A new tensor on `like`'s device, with its dtype, laid out in `format`.
Tensor new_output(const Shape& sizes, const Tensor& like, MemoryFormat format) {
  return empty(sizes, {.dtype = like.dtype(), .device = like.device()}, format);
}

void check_arguments(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  autograd::check_defined("conv2d", input);
  autograd::check_defined("conv2d", weight);
  autograd::check_floating("conv2d", input);
  autograd::check_same_device("conv2d", input, weight);
  MG_CHECK(input.dtype() == weight.dtype(), "conv2d: input has dtype ", input.dtype(), " but weight has ",
           weight.dtype(), ". Hint: convert the weight with weight.to(input.dtype()).");
  MG_CHECK(input.dim() == 4, "conv2d: input must be 4-D (N, C, H, W), got shape ", input.sizes(),
           ". Hint: add a batch dim with unsqueeze(x, 0).");
  MG_CHECK(weight.dim() == 4, "conv2d: weight must be 4-D (K, C/groups, R, S), got shape ", weight.sizes());
  for (int i = 0; i < 2; ++i) {
    MG_CHECK(options.stride[i] >= 1 && options.dilation[i] >= 1 && options.padding[i] >= 0,
             "conv2d: stride and dilation must be >= 1 and padding >= 0, got stride (", options.stride[0], ", ",
             options.stride[1], "), dilation (", options.dilation[0], ", ", options.dilation[1], "), padding (",
             options.padding[0], ", ", options.padding[1], ")");
  }
  int64_t groups = options.groups;
  int64_t channels = input.sizes()[1], out_channels = weight.sizes()[0];
  MG_CHECK(groups >= 1, "conv2d: groups must be >= 1, got ", groups);
  MG_CHECK(channels % groups == 0, "conv2d: input ", input.sizes(), " has ", channels,
           " channels, not divisible by groups = ", groups);
  MG_CHECK(out_channels % groups == 0, "conv2d: weight ", weight.sizes(), " has ", out_channels,
           " output channels, not divisible by groups = ", groups);
  MG_CHECK(weight.sizes()[1] == channels / groups, "conv2d: weight ", weight.sizes(), " expects ",
           weight.sizes()[1], " input channels per group, but input ", input.sizes(), " has ", channels,
           " channels in ", groups, " group(s), i.e. ", channels / groups,
           " per group. Hint: weight's dim 1 must be C / groups.");
  if (bias.defined()) {
    autograd::check_same_device("conv2d", input, bias);
    MG_CHECK(bias.dtype() == input.dtype(), "conv2d: bias has dtype ", bias.dtype(), " but input has ",
             input.dtype(), ". Hint: convert it with bias.to(input.dtype()).");
    MG_CHECK(bias.dim() == 1 && bias.sizes()[0] == out_channels, "conv2d: bias has shape ", bias.sizes(),
             " but weight ", weight.sizes(), " has ", out_channels, " output channels; expected [",
             out_channels, "]");
  }
}

// One output size: (size + 2*pad - dilation*(kernel-1) - 1)/stride + 1, checked positive.
int64_t output_size(const Tensor& input, const Tensor& weight, const Conv2dOptions& options, int i) {
  int64_t size = input.sizes()[2 + i], kernel = weight.sizes()[2 + i];
  int64_t span = options.dilation[i] * (kernel - 1) + 1;
  int64_t padded = size + 2 * options.padding[i];
  MG_CHECK(padded >= span, "conv2d: input ", input.sizes(), " is smaller than the dilated kernel ",
           options.dilation[0] * (weight.sizes()[2] - 1) + 1, "x", options.dilation[1] * (weight.sizes()[3] - 1) + 1,
           " with padding ", options.padding[i], ". Hint: pad the input or use a smaller kernel or dilation.");
  return (padded - span) / options.stride[i] + 1;
}

// Conv2dBackward's backward data where its input is batch_norm_relu's output in training
// and this node that output's only consumer in the backward: the kernel forms the ReLU's
// mask and batch norm's backward sums as it writes the input's gradient, and hands the sums
// to batch norm's node, whose own backward is then one pass (autograd/relu_batch_norm_node.h).
// false, with nothing written, where the node or the device cannot.
bool backward_input_with_batch_norm_sums(const autograd::Node& node, const Tensor& grad_output,
                                         const Tensor& weight, const Window2d& window, const Tensor& grad_input) {
  // NOTE: only 16-bit data has a fused kernel (kernel table); checked first so that other
  // dtypes allocate nothing for it.
  const DType dtype = grad_output.dtype();
  if (!is_16_bit_float(dtype)) return false;
  auto* producer = dynamic_cast<autograd::ReluBatchNormNode*>(node.next_edges()[0].function.get());
  if (producer == nullptr || !autograd::is_sole_consumer(node, 0)) return false;
  const autograd::ReluBatchNormNode::Saved saved = producer->saved_for_consumer();
  const int64_t channels = saved.input.size(1);
  const TensorOptions per_channel{.dtype = DType::Float32, .device = grad_output.device()};
  Tensor coefficients = empty({3, channels}, per_channel);
  Tensor grad_weight = empty({channels}, per_channel), grad_bias = empty({channels}, per_channel);
  // The Recorder names what the fused kernel borrows (its workspace) apart.
  memory::OpScope scope("Conv2dBackward[fused with batch norm's sums]");
  if (!kernels(grad_output.device())
           .conv2d_backward_input_relu_batch_norm(grad_output, weight, window, saved.input, saved.mean, saved.invstd,
                                                  saved.weight, saved.bias, grad_input, coefficients, grad_weight,
                                                  grad_bias)) {
    return false;
  }
  producer->hand_over_sums(std::move(coefficients), std::move(grad_weight), std::move(grad_bias));
  return true;
}

// conv2d in the operands' own dtypes (what autocast hands it, or the caller's); with
// `statistics`, also batch norm's statistics of the output where the device fuses them.
Tensor conv2d_in_given_dtypes(const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const Conv2dOptions& options, ChannelSums* statistics = nullptr) {
  check_arguments(input, weight, bias, options);
  int64_t out_h = output_size(input, weight, options, 0), out_w = output_size(input, weight, options, 1);
  Window2d window;
  window.stride_h = options.stride[0];
  window.stride_w = options.stride[1];
  window.pad_h = options.padding[0];
  window.pad_w = options.padding[1];
  window.dilation_h = options.dilation[0];
  window.dilation_w = options.dilation[1];
  window.groups = options.groups;

  Tensor dense_input = dense(input, MemoryFormat::Contiguous), dense_weight = dense(weight, MemoryFormat::Contiguous);
  MemoryFormat input_format = suggest_memory_format(dense_input);
  MemoryFormat weight_format = suggest_memory_format(dense_weight);
  MemoryFormat out_format = output_format(dense_input, dense_weight);
  const Shape out_sizes{input.sizes()[0], weight.sizes()[0], out_h, out_w};
  // The output, and batch norm's statistics of it where the kernel made them.
  const std::vector<Tensor> results =
      autograd::kept_or_computed(OpKind::Convolution, "conv2d", out_sizes, input.dtype(), [&] {
        Tensor out = new_output(out_sizes, input, out_format);
        const KernelTable& kernel = kernels(input.device());
        if (statistics != nullptr && !bias.defined()) {
          const TensorOptions per_channel{.dtype = DType::Float32, .device = input.device()};
          Tensor sum = empty({weight.sizes()[0]}, per_channel), square_sum = empty({weight.sizes()[0]}, per_channel);
          if (kernel.conv2d_with_statistics(dense_input, dense_weight, window, out, sum, square_sum)) {
            return std::vector<Tensor>{out, sum, square_sum};
          }
        }
        kernel.conv2d(dense_input, dense_weight, bias.defined() ? contiguous(bias) : Tensor(), window, out);
        return std::vector<Tensor>{out};
      });
  const Tensor& out = results[0];
  if (results.size() == 3) *statistics = ChannelSums{results[1], results[2]};

  if (needs_grad(input, weight, bias)) {
    // NOTE: the saved tensors are the caller's, not the dense copies: saving a copy would
    // hold a second activation; backward makes the (rare) copy again instead.
    autograd::record(
        "Conv2dBackward", out, {input, weight, bias},
        autograd::saved(needs_grad(weight) ? input : Tensor(), needs_grad(input) ? weight : Tensor()),
        [window, input_sizes = input.sizes(), weight_sizes = weight.sizes(), input_format, weight_format, out_format](
            const Node& node, const Tensor& grad, const Tensor& saved_input, const Tensor& saved_weight) {
          const KernelTable& kernel = kernels(grad.device());
          Tensor grad_output = dense(grad, out_format);  // (N, K, P, Q)
          // Marked before the input's gradient is enqueued: the weight's needs only
          // grad_output and the input, so on a side stream it does not wait for that one.
          autograd::SideStreamWork weight_gradient_work(grad.device(), node.needs_input_grad(1));
          Tensor grad_input, grad_weight, grad_bias;
          if (node.needs_input_grad(0)) {
            // Added into the input's gradient from another branch where the engine has one
            // (a residual block's shortcut): no second buffer, and no sum pass after.
            grad_input = autograd::take_delivered_gradient(node, 0, input_sizes, input_format, grad.dtype(),
                                                           grad.device());
            const bool accumulate = grad_input.defined();
            if (!accumulate) grad_input = new_output(input_sizes, grad, input_format);
            const Tensor dense_weight = dense(saved_weight, weight_format);
            if (accumulate ||
                !backward_input_with_batch_norm_sums(node, grad_output, dense_weight, window, grad_input)) {
              kernel.conv2d_backward_input(grad_output, dense_weight, window, grad_input, accumulate);
            }
          }
          if (node.needs_input_grad(1)) {
            weight_gradient_work.run(1, {grad_output, saved_input}, [&] {
              grad_weight = new_output(weight_sizes, grad, weight_format);
              kernel.conv2d_backward_weight(grad_output, dense(saved_input, input_format), window, grad_weight);
            });
          }
          if (node.needs_input_grad(2)) grad_bias = sum(grad_output, {0, 2, 3});
          return std::vector<Tensor>{grad_input, grad_weight, grad_bias};
        });
  }
  return out;
}

}  // namespace

// Convolutions run in the autocast dtype inside an autocast region (autocast/cast_policy.h).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  if (amp::is_autocast_on_for(input)) {
    return conv2d_in_given_dtypes(amp::cast_to_autocast_dtype(input), amp::cast_to_autocast_dtype(weight),
                                  amp::cast_to_autocast_dtype(bias), options);
  }
  return conv2d_in_given_dtypes(input, weight, bias, options);
}

ConvWithStatistics conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Conv2dOptions& options) {
  ConvWithStatistics result;
  if (amp::is_autocast_on_for(input)) {
    result.output = conv2d_in_given_dtypes(amp::cast_to_autocast_dtype(input), amp::cast_to_autocast_dtype(weight),
                                           Tensor(), options, &result.statistics);
  } else {
    result.output = conv2d_in_given_dtypes(input, weight, Tensor(), options, &result.statistics);
  }
  return result;
}

}  // namespace mg
