// autograd/conv.h — 2-D convolution: stride, padding, dilation, groups, bias; tensors in
// NCHW or channels_last (core/memory_format.h), the output channels_last when the input or
// the weight is, as in PyTorch. On CUDA it runs cuDNN when built with it (switches in
// cuda/cudnn/settings.h). Saves its input and weight (what the two backward products
// need), not its output.
#pragma once

#include <array>

#include "memgrad/core/channel_sums.h"
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

// conv2d (no bias) and, where the device computes them in the same kernel, batch norm's
// statistics of its output, for the batch norm that follows in training: CUDA with cuDNN,
// float16 or bfloat16 (after autocast) with every tensor channels_last, and
// cuda::set_cudnn_fusion on (cuda/cudnn/conv.h). Elsewhere `statistics` is undefined and
// the batch norm computes them itself, as always. The output is conv2d's and
// differentiable as conv2d's; the statistics carry no gradient (the batch norm that reads
// them differentiates through the statistics it saves).
struct ConvWithStatistics {
  Tensor output;
  ChannelSums statistics;
};
ConvWithStatistics conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Conv2dOptions& options = {});

}  // namespace mg
