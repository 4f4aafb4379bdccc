// autograd/matmul.h — matrix products and the linear layer's op.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

// torch.matmul semantics: 1-D @ 1-D is a dot product, 2-D @ 2-D a matrix product, and
// higher ranks are batched with the batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias, x (*, in), weight (out, in), bias (out) or undefined.
// Saves x and weight (not y).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace mg
