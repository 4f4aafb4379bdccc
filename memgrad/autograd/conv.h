// autograd/conv.h — 2-D convolution: stride, padding, dilation, groups, bias; tensors in
// NCHW or channels_last (core/memory_format.h), the output channels_last when the input or
// the weight is, as in PyTorch. On CUDA it runs cuDNN when built with it (switches in
// cuda/cudnn/settings.h). Saves its input and weight (what the two backward products
// need), not its output.
#pragma once

#include <array>

#include "memgrad/core/tensor.h"

namespace mg {

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

// input (N, C, H, W), weight (K, C/groups, R, S), bias (K) or undefined → (N, K, P, Q)
// (sizes are logical: channels_last changes the strides only).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Conv2dOptions& options = {});

}  // namespace mg
