// autograd/layer_norm.h — layer normalisation over the trailing dims, as
// torch.nn.functional.layer_norm.
#pragma once

#include "core/tensor.h"

namespace mg {

// Normalises x over its last normalized_shape.size() dims (which must equal
// normalized_shape), then scales by weight and shifts by bias (each of normalized_shape,
// or undefined). One node saves the input and, per normalised row, the mean and 1/std
// in float32: two floats a row instead of a normalised copy of the input.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace mg
