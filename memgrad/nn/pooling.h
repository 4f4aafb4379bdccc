// nn/pooling.h — the pooling layers (NCHW): MaxPool2d, AvgPool2d and AdaptiveAvgPool2d,
// parameter-free modules around the ops in autograd/pool.h.
#pragma once

#include <array>
#include <cstdint>

#include "memgrad/autograd/pool.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

// Max over each kernel window. Memory: saves one byte per output element for backward.
class MaxPool2d : public Module {
 public:
  // stride {0, 0} (the default) means the kernel size, as in PyTorch.
  explicit MaxPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                     std::array<int64_t, 2> padding = {0, 0});
  // A square window; stride 0 means the kernel size.
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  explicit MaxPool2d(const Pool2dOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Mean over each kernel window (padding counted as zeros unless count_include_pad is off).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                     std::array<int64_t, 2> padding = {0, 0});
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  explicit AvgPool2d(const Pool2dOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Averages into a fixed output size whatever the input's height and width ({1, 1}: global
// average pooling, as at the end of a ResNet).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  const std::array<int64_t, 2>& output_size() const { return output_size_; }

 private:
  std::array<int64_t, 2> output_size_;
};

}  // namespace mg::nn
