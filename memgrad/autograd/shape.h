// autograd/shape.h — differentiable views and joins. Views share the input's storage (no
// bytes are allocated); their backward reshapes or pads the gradient back.
#pragma once

#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

Tensor view(const Tensor& x, const Shape& sizes);     // sizes may hold one -1
Tensor reshape(const Tensor& x, const Shape& sizes);  // a view when strides allow, else a copy
Tensor permute(const Tensor& x, const Shape& order);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& sizes);  // -1 keeps a size
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of consecutive pieces along dim: split into pieces of split_size (the last may be
// smaller), split into the given sizes, or chunk into `chunks` pieces (as torch.chunk).
// The pieces share one node, whose backward joins their gradients in one tensor.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// x where mask is false, value where it is true; mask (bool) broadcasts to x's sizes.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// The lower (upper) triangle of the last two dims: entries with col - row <= diagonal
// (>= diagonal) are kept, the rest are zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace mg
