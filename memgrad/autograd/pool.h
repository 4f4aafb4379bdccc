// autograd/pool.h — 2-D pooling (NCHW): max (saving one byte per output for backward:
// the position of the maximum inside its window), average, and adaptive average.
#pragma once

#include <array>

#include "memgrad/core/tensor.h"

namespace mg {

struct Pool2dOptions {
  std::array<int64_t, 2> kernel_size{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // {0, 0}: the kernel size, as in PyTorch
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options = {});
// Output (N, C, out_h, out_w); each output averages the input window PyTorch assigns it
// (start = floor(i * H / out_h), end = ceil((i + 1) * H / out_h)).
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);

}  // namespace mg
