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
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace mg
