// autograd/split.h — differentiable split and chunk: views of consecutive pieces of a
// tensor along one dim.
#pragma once

#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

// Views of consecutive pieces along dim: split into pieces of split_size (the last may be
// smaller), split into the given sizes, or chunk into `chunks` pieces (as torch.chunk).
// The pieces share one node, whose backward joins their gradients in one tensor.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace mg
