// autograd/topk.h — differentiable topk: the k largest (or smallest) values along a dim.
#pragma once

#include <tuple>

#include "memgrad/core/tensor.h"

namespace mg {

// The k largest (largest = false: smallest) values along dim and their int64 indices, as
// torch.topk (sorted); the values' gradient goes back to the indices.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace mg
