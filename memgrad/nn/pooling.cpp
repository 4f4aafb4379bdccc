// nn/pooling.cpp — the pooling layers: option checks and calls to the pool ops.
#include "memgrad/nn/pooling.h"

namespace mg::nn {

namespace {

std::string pair_str(const std::array<int64_t, 2>& values) {
  return detail::str_cat("(", values[0], ", ", values[1], ")");
}

// Checks the options a user gave and resolves stride {0, 0} to the kernel size, so that
// extra_repr prints what is actually used.
Pool2dOptions checked_options(const char* layer, Pool2dOptions options) {
  for (int dim = 0; dim < 2; ++dim) {
    MG_CHECK(options.kernel_size[dim] > 0, layer, ": kernel_size=", pair_str(options.kernel_size),
             " must be positive in both dimensions");
    MG_CHECK(options.stride[dim] >= 0, layer, ": stride=", pair_str(options.stride),
             " must be non-negative (0 means the kernel size)");
    MG_CHECK(options.padding[dim] >= 0 && 2 * options.padding[dim] <= options.kernel_size[dim], layer,
             ": padding=", pair_str(options.padding), " must be between 0 and half the kernel size ",
             pair_str(options.kernel_size), ", as in PyTorch");
  }
  if (options.stride == std::array<int64_t, 2>{0, 0}) options.stride = options.kernel_size;
  return options;
}

Pool2dOptions make_options(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
                           std::array<int64_t, 2> padding) {
  Pool2dOptions options;
  options.kernel_size = kernel_size;
  options.stride = stride;
  options.padding = padding;
  return options;
}

std::string pool_repr(const Pool2dOptions& options) {
  return detail::str_cat("kernel_size=", pair_str(options.kernel_size), ", stride=", pair_str(options.stride),
                         ", padding=", pair_str(options.padding));
}

}  // namespace

MaxPool2d::MaxPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
                     std::array<int64_t, 2> padding)
    : MaxPool2d(make_options(kernel_size, stride, padding)) {}

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : MaxPool2d({kernel_size, kernel_size}, {stride, stride}, {padding, padding}) {}

MaxPool2d::MaxPool2d(const Pool2dOptions& options)
    : Module("MaxPool2d"), options_(checked_options("MaxPool2d", options)) {}

Tensor MaxPool2d::forward(const Tensor& input) { return max_pool2d(input, options_); }

std::string MaxPool2d::extra_repr() const {
  return detail::str_cat(pool_repr(options_), ", dilation=", pair_str(options_.dilation),
                         ", ceil_mode=", options_.ceil_mode ? "True" : "False");
}

AvgPool2d::AvgPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
                     std::array<int64_t, 2> padding)
    : AvgPool2d(make_options(kernel_size, stride, padding)) {}

AvgPool2d::AvgPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : AvgPool2d({kernel_size, kernel_size}, {stride, stride}, {padding, padding}) {}

AvgPool2d::AvgPool2d(const Pool2dOptions& options)
    : Module("AvgPool2d"), options_(checked_options("AvgPool2d", options)) {}

Tensor AvgPool2d::forward(const Tensor& input) { return avg_pool2d(input, options_); }

std::string AvgPool2d::extra_repr() const { return pool_repr(options_); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<int64_t, 2> output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(output_size) {
  MG_CHECK(output_size[0] > 0 && output_size[1] > 0, "AdaptiveAvgPool2d: output_size=", pair_str(output_size),
           " must be positive in both dimensions");
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) { return adaptive_avg_pool2d(input, output_size_); }

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + pair_str(output_size_); }

}  // namespace mg::nn
