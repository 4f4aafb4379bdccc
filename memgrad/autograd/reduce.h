// autograd/reduce.h — differentiable reductions (sum, mean, max) over all or some dims,
// and argmax (no gradient).
#pragma once

#include <tuple>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Maximum of all elements; the gradient is shared evenly among ties (as torch.amax).
Tensor max(const Tensor& x);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Values and int64 indices of the maximum along dim; the gradient goes to the index.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace mg
