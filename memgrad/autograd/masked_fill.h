// autograd/masked_fill.h — differentiable masked_fill, and tril/triu (masked_fill with a
// triangular mask).
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

// x where mask is false, value where it is true; mask (bool) broadcasts to x's sizes.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// The lower (upper) triangle of the last two dims: entries with col - row <= diagonal
// (>= diagonal) are kept, the rest are zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace mg
