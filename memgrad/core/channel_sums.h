// core/channel_sums.h — batch norm's statistics of a tensor, handed over by whoever made the
// tensor: per channel, the sum and the sum of squares over (N, H, W). A convolution on
// cuDNN can generate them in its epilogue (autograd/conv.h's conv2d_with_statistics), and
// the batch norm that follows (autograd/norm.h) then skips its own pass over the tensor.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

// Both (C) float32 on the tensor's device, or both undefined: nobody computed them.
struct ChannelSums {
  Tensor sum;
  Tensor square_sum;
  bool defined() const { return sum.defined(); }
};

}  // namespace mg
