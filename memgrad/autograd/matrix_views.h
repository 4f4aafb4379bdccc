// autograd/matrix_views.h — the views the products' ops (matmul, linear, mlp) hand the matrix
// kernels: a tensor's leading dims folded into rows, a size-1 batch dim, a transposed batch,
// all without copying where the strides allow; and a linear layer's forward into a given
// output, which linear and mlp both run. Views carry no autograd history: the ops record
// their own nodes.
#pragma once

#include <cstdint>
#include <optional>

#include "memgrad/core/kernels.h"
#include "memgrad/core/shape.h"
#include "memgrad/core/tensor.h"

namespace mg::autograd {

// The single stride that walks dims [0, count) of (sizes, strides) as one folded dim, or
// nothing when they do not fold. Size-1 dims never matter.
std::optional<int64_t> folded_stride(const Shape& sizes, const Shape& strides, int count);

// x with a size-1 dim inserted at `dim`.
Tensor unsqueezed(const Tensor& x, int dim);
// A (B, R, C) batch of matrices as the kernel's (B, C, R) transpose.
Tensor transposed(const Tensor& batch_of_matrices);
// x (..., C) with all leading dims folded into rows: (1, R, C). A view when strides allow.
Tensor as_rows(const Tensor& x);
// x itself when contiguous (or undefined), else a contiguous copy.
Tensor contiguous_or_copy(const Tensor& x);
// x (..., C) as a contiguous (R, C) matrix, R the product of the leading dims: a view of x
// when x is contiguous, else of a copy.
Tensor contiguous_matrix(const Tensor& x);

// output (..., out) = x (..., in) @ weight (out, in)^T + bias (out), bias possibly undefined,
// output contiguous: one linear_forward call (the bias added in the product's epilogue on
// CUDA) with a bias, else one matmul against weight^T as a view.
void linear_into(const KernelTable& kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 const Tensor& output);

}  // namespace mg::autograd
