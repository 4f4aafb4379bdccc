// autograd/layer_norm.h — layer normalisation over the trailing dims, as
// torch.nn.functional.layer_norm.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

// Normalises x over its last normalized_shape.size() dims (which must equal
// normalized_shape), then scales by weight and shifts by bias (each of normalized_shape,
// or undefined; the input's dtype, or float32 with a 16-bit input). The result has x's
// dtype; under autocast it runs in float32 like PyTorch's (16-bit inputs are cast up, the
// result is float32). One node saves the input and, per normalised row, the mean and
// 1/std in float32 (float64 for a float64 input): two values a row instead of a
// normalised copy of the input.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// A pre-norm transformer's residual add and the next layer norm: sum = x + residual (the
// dtypes promoted as by +), output = layer_norm(sum, normalized_shape, weight, bias, eps).
struct SumAndNorm {
  Tensor sum;
  Tensor output;
};
// One kernel each way and one node, where x and residual have the same sizes and either the
// same dtype or float32 and a 16-bit one (a float32 residual stream plus a bfloat16
// block's output under autocast): the forward writes the sum and normalises it in one pass,
// and the backward adds the sum's own gradient to the norm's in its one pass; the node
// saves the sum (which the next block reads anyway) and two statistics per row. Otherwise
// (broadcasting, other dtypes, a 16-bit sum under autocast, which layer_norm runs in
// float32) it is the add followed by layer_norm.
SumAndNorm add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                          const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

}  // namespace mg
