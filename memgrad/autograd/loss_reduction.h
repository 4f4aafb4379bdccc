// autograd/loss_reduction.h — the reduction of per-sample losses that the class-index
// losses share (autograd/loss.cpp's cross_entropy and nll_loss, and
// autograd/linear_cross_entropy.cpp). Internal to autograd/.
#pragma once

#include "memgrad/autograd/loss.h"

namespace mg::autograd {

// Per-sample losses (N) reduced: themselves, their sum, or their mean over the counted
// targets (labels other than ignore_index). For the mean, `count` becomes the (1) device
// tensor of counted targets that the backward divides by.
Tensor reduce_per_sample(const Tensor& losses, const Tensor& labels, Reduction reduction, int64_t ignore_index,
                         Tensor& count);

}  // namespace mg::autograd
