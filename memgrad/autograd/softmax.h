// autograd/softmax.h — softmax and log_softmax along a dimension; each saves its output
// (not its input), which is all its backward needs.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace mg
