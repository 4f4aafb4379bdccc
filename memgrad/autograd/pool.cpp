// autograd/pool.cpp — 2-D max, average and adaptive average pooling, forward and backward.
//
// Inputs dense in NCHW or channels-last order go to the kernels as they are; the output,
// the saved window positions and the input's gradient take the input's layout.
//
// Memory: max pooling saves, per output, one uint8 — the position of the maximum inside
// its window (r * kernel_w + s) — and nothing else; PyTorch keeps an int64 index per
// output, 8x the bytes. That is why the window is limited to 256 positions. Average
// pooling saves nothing: its backward needs only the geometry and the input's sizes.
//
// adaptive_avg_pool2d supports the two shapes networks use: an output that divides the
// input (an avg_pool2d with kernel = stride = input / output) and the global 1x1 average
// (a mean over H and W for NCHW inputs); other sizes throw a "not supported yet" error
// naming them.
#include "memgrad/autograd/pool.h"

#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/reduce.h"

namespace mg {

namespace {

// PyTorch's pooling output size along one dimension: floor (or ceil) of the window count,
// where in ceil_mode the last window must start inside the input or the left padding.
int64_t pooled_size(int64_t input_size, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode) {
  int64_t span = input_size + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (span may be negative for windows larger than the padded input).
  int64_t windows = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (windows - 1) * stride >= input_size + pad) --windows;
  return windows;
}

// Validates the options and turns them into the kernels' Window2d.
Window2d pooling_window(const char* op, const Tensor& input, const Pool2dOptions& options, bool is_max) {
  autograd::check_defined(op, input);
  autograd::check_floating(op, input);
  MG_CHECK(input.dim() == 4, op, ": expected a 4-D input (N, C, H, W), got shape ", input.sizes(),
           ". Hint: add a batch dimension with unsqueeze(0) for a single image.");
  Window2d window;
  window.kernel_h = options.kernel_size[0];
  window.kernel_w = options.kernel_size[1];
  // NOTE: stride {0, 0} means "the kernel size", PyTorch's default.
  bool default_stride = options.stride[0] == 0 && options.stride[1] == 0;
  window.stride_h = default_stride ? window.kernel_h : options.stride[0];
  window.stride_w = default_stride ? window.kernel_w : options.stride[1];
  window.pad_h = options.padding[0];
  window.pad_w = options.padding[1];
  window.dilation_h = is_max ? options.dilation[0] : 1;
  window.dilation_w = is_max ? options.dilation[1] : 1;
  window.ceil_mode = options.ceil_mode;
  window.count_include_pad = options.count_include_pad;
  MG_CHECK(window.kernel_h > 0 && window.kernel_w > 0, op, ": kernel_size must be positive, got {",
           window.kernel_h, ", ", window.kernel_w, "}");
  MG_CHECK(window.stride_h > 0 && window.stride_w > 0, op, ": stride must be positive (or {0, 0} for the kernel size), got {",
           window.stride_h, ", ", window.stride_w, "}");
  MG_CHECK(window.dilation_h > 0 && window.dilation_w > 0, op, ": dilation must be positive, got {",
           window.dilation_h, ", ", window.dilation_w, "}");
  MG_CHECK(window.pad_h >= 0 && window.pad_w >= 0 && window.pad_h <= window.kernel_h / 2 &&
               window.pad_w <= window.kernel_w / 2,
           op, ": padding must be between 0 and half the kernel size, got padding {", window.pad_h, ", ",
           window.pad_w, "} for kernel {", window.kernel_h, ", ", window.kernel_w,
           "}. Hint: pad more with a larger kernel, or pad the input explicitly.");
  if (is_max) {
    MG_CHECK(window.kernel_h * window.kernel_w <= 256, op, ": a window of ", window.kernel_h, " x ", window.kernel_w,
             " = ", window.kernel_h * window.kernel_w,
             " positions is too large: memgrad saves the position of each maximum as one byte, so at most 256 "
             "positions are supported. Hint: pool in two steps with smaller kernels.");
  }
  return window;
}

Shape pooled_shape(const char* op, const Tensor& input, const Window2d& window) {
  const Shape& in = input.sizes();
  int64_t out_h = pooled_size(in[2], window.kernel_h, window.stride_h, window.pad_h, window.dilation_h, window.ceil_mode);
  int64_t out_w = pooled_size(in[3], window.kernel_w, window.stride_w, window.pad_w, window.dilation_w, window.ceil_mode);
  MG_CHECK(out_h > 0 && out_w > 0, op, ": the output would be ", out_h, " x ", out_w, " for an input of shape ",
           in, " with kernel {", window.kernel_h, ", ", window.kernel_w, "}, stride {", window.stride_h, ", ",
           window.stride_w, "}, padding {", window.pad_h, ", ", window.pad_w, "}, dilation {", window.dilation_h,
           ", ", window.dilation_w, "}. Hint: the (dilated) kernel must fit inside the padded input.");
  return {in[0], in[1], out_h, out_w};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  Window2d window = pooling_window("max_pool2d", x, options, /*is_max=*/true);
  Shape out_shape = pooled_shape("max_pool2d", x, window);
  Tensor input = autograd::dense_layout(x);
  MemoryFormat format = suggest_memory_format(input);
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()}, format);
  Tensor window_indices = empty(out_shape, {.dtype = DType::UInt8, .device = x.device()}, format);
  kernels(x.device()).max_pool2d(input, window, out, window_indices);

  if (autograd::needs_grad(x)) {
    Shape input_shape = x.sizes();
    // Only the one-byte positions are saved: neither the input nor the output.
    autograd::record("MaxPool2dBackward", out, {x}, autograd::saved(window_indices),
                     [window, input_shape, format](const autograd::Node&, const Tensor& grad,
                                                   const Tensor& saved_indices) {
                       Tensor grad_output = autograd::in_format(grad, format);  // the positions' layout
                       Tensor grad_input = empty(input_shape, {.dtype = grad.dtype(), .device = grad.device()}, format);
                       kernels(grad.device()).max_pool2d_backward(grad_output, saved_indices, window, grad_input);
                       return std::vector<Tensor>{grad_input};
                     });
  }
  return out;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  Window2d window = pooling_window("avg_pool2d", x, options, /*is_max=*/false);
  Shape out_shape = pooled_shape("avg_pool2d", x, window);
  Tensor input = autograd::dense_layout(x);
  MemoryFormat format = suggest_memory_format(input);
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()}, format);
  kernels(x.device()).avg_pool2d(input, window, out);

  if (autograd::needs_grad(x)) {
    Shape input_shape = x.sizes();
    // Nothing saved: the backward spreads each gradient evenly over its window.
    autograd::record("AvgPool2dBackward", out, {x}, autograd::saved(),
                     [window, input_shape, format](const autograd::Node&, const Tensor& grad) {
                       Tensor grad_output = autograd::in_format(grad, format);
                       Tensor grad_input = empty(input_shape, {.dtype = grad.dtype(), .device = grad.device()}, format);
                       kernels(grad.device()).avg_pool2d_backward(grad_output, window, grad_input);
                       return std::vector<Tensor>{grad_input};
                     });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  autograd::check_defined("adaptive_avg_pool2d", x);
  MG_CHECK(x.dim() == 4, "adaptive_avg_pool2d: expected a 4-D input (N, C, H, W), got shape ", x.sizes(),
           ". Hint: add a batch dimension with unsqueeze(0) for a single image.");
  int64_t height = x.sizes()[2], width = x.sizes()[3];
  int64_t out_h = output_size[0], out_w = output_size[1];
  MG_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output_size must be positive, got {", out_h, ", ", out_w,
           "}");
  // The global average of an NCHW input is a mean over contiguous rows: reduce's fastest
  // form, and its gradient is a free stride-0 view. In channels-last order the channels
  // interleave, and a window over the whole image (below) reads them coalesced, adjacent
  // threads on adjacent channels, where reduce would first copy the input to NCHW.
  if (out_h == 1 && out_w == 1 && suggest_memory_format(x) == MemoryFormat::Contiguous) {
    return mean(x, {2, 3}, /*keepdim=*/true);
  }
  MG_CHECK(height % out_h == 0 && width % out_w == 0, "adaptive_avg_pool2d: output size {", out_h, ", ", out_w,
           "} for an input of ", height, " x ", width,
           " is not supported yet: memgrad supports output sizes that divide the input size, and {1, 1}. "
           "Hint: resize or pad the input to a multiple of the output size.");
  // With divisible sizes PyTorch's windows (floor(i * H / out) .. ceil((i + 1) * H / out))
  // are exactly the non-overlapping tiles of an avg_pool2d.
  Pool2dOptions options;
  options.kernel_size = {height / out_h, width / out_w};
  options.stride = options.kernel_size;
  return avg_pool2d(x, options);
}

}  // namespace mg
