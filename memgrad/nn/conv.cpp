// nn/conv.cpp — the convolution layer: checks, PyTorch's init, and a call to mg::conv2d.
#include "memgrad/nn/conv.h"

#include <cmath>

#include "memgrad/core/factory.h"
#include "memgrad/nn/init.h"

namespace mg::nn {

namespace {

std::string pair_str(const std::array<int64_t, 2>& values) {
  return detail::str_cat("(", values[0], ", ", values[1], ")");
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size,
               const Conv2dOptions& options, bool has_bias, Generator* generator)
    : Module("Conv2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      options_(options) {
  MG_CHECK(in_channels > 0 && out_channels > 0, "Conv2d(", in_channels, ", ", out_channels,
           "): the numbers of channels must be positive");
  MG_CHECK(kernel_size[0] > 0 && kernel_size[1] > 0, "Conv2d: kernel_size=", pair_str(kernel_size),
           " must be positive in both dimensions");
  MG_CHECK(options.groups > 0 && in_channels % options.groups == 0 && out_channels % options.groups == 0,
           "Conv2d(", in_channels, ", ", out_channels, ", groups=", options.groups,
           "): groups must be positive and divide both channel counts");
  weight = register_parameter(
      "weight", empty({out_channels, in_channels / options.groups, kernel_size[0], kernel_size[1]}));
  // NOTE: a = sqrt(5) is PyTorch's reset_parameters choice; it makes the weight bound
  // 1/sqrt(fan_in), the same as the bias bound below.
  init::kaiming_uniform_(weight, std::sqrt(5.0), generator);
  if (has_bias) {
    bias = register_parameter("bias", empty({out_channels}));
    int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound, generator);
  }
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& options,
               bool has_bias, Generator* generator)
    : Conv2d(in_channels, out_channels, std::array<int64_t, 2>{kernel_size, kernel_size}, options, has_bias,
             generator) {}

Tensor Conv2d::forward(const Tensor& input) { return conv2d(input, weight, bias, options_); }

ConvWithStatistics Conv2d::forward_with_statistics(const Tensor& input) {
  if (!is_training() || bias.defined()) return {(*this)(input), {}};
  NamedCall call(*this);  // named as operator() names forward()
  return conv2d_with_statistics(input, weight, options_);
}

std::string Conv2d::extra_repr() const {
  std::string text = detail::str_cat(in_channels_, ", ", out_channels_, ", kernel_size=", pair_str(kernel_size_),
                                     ", stride=", pair_str(options_.stride));
  // PyTorch prints only the settings that differ from their defaults, except stride.
  if (options_.padding != std::array<int64_t, 2>{0, 0}) text += ", padding=" + pair_str(options_.padding);
  if (options_.dilation != std::array<int64_t, 2>{1, 1}) text += ", dilation=" + pair_str(options_.dilation);
  if (options_.groups != 1) text += detail::str_cat(", groups=", options_.groups);
  if (!bias.defined()) text += ", bias=False";
  return text;
}

}  // namespace mg::nn
