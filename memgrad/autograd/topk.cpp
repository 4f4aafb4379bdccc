// autograd/topk.cpp — topk.h's topk, forward and backward side by side.
//
// Its node saves only the (..., k) int64 indices, not the input: the input's gradient is
// zero but at those indices.
#include "memgrad/autograd/topk.h"

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

using autograd::Node;
using autograd::needs_grad;
using autograd::record;
using autograd::saved;

// `x` with dim d moved last (a view), and the order that moves it back.
struct DimLast {
  Tensor view;
  Shape restore_order;
};
DimLast move_dim_last(const Tensor& x, int d) {
  Shape order, sizes, strides;
  for (int k = 0; k < x.dim(); ++k) {
    if (k != d) order.push_back(k);
  }
  order.push_back(d);
  Shape restore_order = Shape::filled(x.dim(), 0);
  for (int k = 0; k < x.dim(); ++k) {
    restore_order[order[k]] = k;
    sizes.push_back(x.sizes()[order[k]]);
    strides.push_back(x.strides()[order[k]]);
  }
  return {make_view(x, sizes, strides, x.storage_offset()), restore_order};
}

// `x` (a tensor with the topk dim last) viewed with its dims in `order`.
Tensor permuted_view(const Tensor& x, const Shape& order) {
  Shape sizes, strides;
  for (int k = 0; k < x.dim(); ++k) {
    sizes.push_back(x.sizes()[order[k]]);
    strides.push_back(x.strides()[order[k]]);
  }
  return make_view(x, sizes, strides, x.storage_offset());
}

}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  // NOTE: the kernels always sort, so `sorted` = false (any order allowed) gets sorted too.
  (void)sorted;
  autograd::check_defined("topk", x);
  MG_CHECK(x.dim() > 0, "topk: expected a tensor of at least 1 dimension, got a 0-d tensor. Hint: reshape it to (1).");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  MG_CHECK(k >= 0 && k <= size, "topk: k = ", k, " is out of range for dimension ", d, " of size ", size,
           " (tensor of shape ", x.sizes(), "). Hint: k must be between 0 and the dimension's size.");
  // The kernels take rows along the last dim, contiguous: move dim last (a copy unless
  // it already is); the results are viewed back into x's dim order.
  DimLast moved = move_dim_last(x, d);
  Tensor rows = moved.view.is_contiguous() ? moved.view : contiguous_copy(moved.view);
  Shape result_sizes = rows.sizes();
  result_sizes[result_sizes.size() - 1] = k;
  Tensor values_last = autograd::new_output(result_sizes, x.dtype(), x);   // (..., k)
  Tensor indices_last = autograd::new_output(result_sizes, DType::Int64, x);
  kernels(x.device()).topk(rows, k, largest, values_last, indices_last);
  Tensor values = permuted_view(values_last, moved.restore_order);
  Tensor indices = permuted_view(indices_last, moved.restore_order);
  if (needs_grad(x)) {
    // grad_input (rows, n) is zero but for grad at each row's k indices: embedding's
    // backward does that scatter, with row r's index j of flat row r * n + j (one column).
    record("TopkBackward", values, {x}, saved(indices_last),
           [moved_sizes = rows.sizes(), d, restore_order = moved.restore_order](
               const Node&, const Tensor& grad, const Tensor& saved_indices) {
             int64_t n = moved_sizes[moved_sizes.size() - 1];
             int64_t row_count = n == 0 ? 0 : moved_sizes.numel() / n;
             int64_t k = saved_indices.sizes()[saved_indices.dim() - 1];
             TensorOptions grad_options{.dtype = grad.dtype(), .device = grad.device()};
             Tensor grad_input = zeros({row_count * n, 1}, grad_options);
             if (row_count * k > 0) {
               Tensor row_starts = arange(0.0, static_cast<double>(row_count * n), static_cast<double>(n),
                                          {.dtype = DType::Int64, .device = grad.device()});
               Tensor flat_indices = add(saved_indices.view({row_count, k}), row_starts.view({row_count, 1}));
               Tensor grad_rows = contiguous_copy(move_dim_last(grad, d).view);  // (..., k)
               kernels(grad.device()).embedding_backward(grad_rows.view({row_count * k, 1}),
                                                         flat_indices.view({row_count * k}), /*padding_idx=*/-1,
                                                         grad_input);
             }
             return std::vector<Tensor>{permuted_view(grad_input.view(moved_sizes), restore_order)};
           });
  }
  return {values, indices};
}

}  // namespace mg
