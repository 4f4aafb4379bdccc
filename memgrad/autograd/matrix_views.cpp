// autograd/matrix_views.cpp — folded, unsqueezed and transposed views for the matrix kernels,
// and linear's forward.
#include "memgrad/autograd/matrix_views.h"

#include "memgrad/core/factory.h"

namespace mg::autograd {

namespace {

int64_t product(const Shape& sizes, int count) {
  int64_t result = 1;
  for (int d = 0; d < count; ++d) result *= sizes[d];
  return result;
}

}  // namespace

std::optional<int64_t> folded_stride(const Shape& sizes, const Shape& strides, int count) {
  int64_t stride = 0;
  int64_t next_expected = -1;  // the stride the next outer dim needs to continue the run
  for (int d = count - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (next_expected < 0) {
      stride = strides[d];
    } else if (strides[d] != next_expected) {
      return std::nullopt;
    }
    next_expected = strides[d] * sizes[d];
  }
  return stride;
}

Tensor unsqueezed(const Tensor& x, int dim) {
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.insert(dim, 1);
  strides.insert(dim, dim < x.dim() ? x.strides()[dim] * x.sizes()[dim] : 1);
  return make_view(x, sizes, strides, x.storage_offset());
}

Tensor transposed(const Tensor& batch_of_matrices) {
  const Shape& sizes = batch_of_matrices.sizes();
  const Shape& strides = batch_of_matrices.strides();
  return make_view(batch_of_matrices, {sizes[0], sizes[2], sizes[1]}, {strides[0], strides[2], strides[1]},
                   batch_of_matrices.storage_offset());
}

Tensor as_rows(const Tensor& x) {
  int leading = x.dim() - 1;
  int64_t cols = x.sizes()[leading];
  int64_t rows = product(x.sizes(), leading);
  Tensor source = x;
  std::optional<int64_t> row_stride = folded_stride(x.sizes(), x.strides(), leading);
  if (!row_stride) {
    source = contiguous_copy(x);
    row_stride = cols;
  }
  return make_view(source, {1, rows, cols}, {0, *row_stride, source.strides()[leading]}, source.storage_offset());
}

Tensor contiguous_or_copy(const Tensor& x) { return !x.defined() || x.is_contiguous() ? x : contiguous_copy(x); }

Tensor contiguous_matrix(const Tensor& x) {
  Tensor source = contiguous_or_copy(x);
  Shape sizes{product(x.sizes(), x.dim() - 1), x.sizes().back()};
  return make_view(source, sizes, contiguous_strides(sizes), source.storage_offset());
}

void linear_into(const KernelTable& kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 const Tensor& output) {
  if (bias.defined()) {
    // One kernel call: the bias is added inside the product (on CUDA in cuBLASLt's GEMM
    // epilogue), not by a second pass that reads and writes the output again.
    kernel.linear_forward(contiguous_matrix(x), contiguous_or_copy(weight), contiguous_or_copy(bias),
                          contiguous_matrix(output));
    return;
  }
  // weight^T as (1, in, out): a transposed view, no copy.
  const int64_t out_features = weight.sizes()[0], in_features = weight.sizes()[1];
  Tensor weight_t = make_view(weight, {1, in_features, out_features}, {0, weight.strides()[1], weight.strides()[0]},
                              weight.storage_offset());
  kernel.matmul(as_rows(x), weight_t, as_rows(output));
}

}  // namespace mg::autograd
