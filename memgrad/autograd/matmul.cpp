// autograd/matmul.cpp — matmul (torch.matmul semantics) and linear, forward and backward.
//
// The kernel multiplies 3-D operands, (B, M, K) @ (B, K, N). Every rank is brought to that
// form with views: a 1-D operand gains a size-1 row (or column), batch dims are broadcast
// and folded into one B dim, and an operand without batch dims repeats with batch stride
// 0 — so a weight is never copied per batch element. A copy is made only when broadcast
// batch dims cannot fold into one stride (e.g. (2, 1, M, K) against (5, K, N)).
// Both products are OpKind::Matmul to a selective checkpoint (autograd/selective_checkpoint.h).
#include "memgrad/autograd/matmul.h"

#include <optional>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/matrix_views.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/selective_checkpoint.h"
#include "memgrad/autograd/shape.h"

namespace mg {

using autograd::as_rows;
using autograd::folded_stride;
using autograd::needs_grad;
using autograd::new_output;
using autograd::Node;
using autograd::transposed;
using autograd::unsqueezed;

namespace {

// x (..., R, C) broadcast to batch dims `batch` and seen as (B, R, C), B = batch.numel().
Tensor as_batched(const Tensor& x, const Shape& batch) {
  int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  int own_batch_dims = x.dim() - 2;
  int missing = batch.size() - own_batch_dims;
  Shape batch_strides = Shape::filled(batch.size(), 0);  // 0 where x repeats
  for (int d = 0; d < own_batch_dims; ++d) {
    if (x.sizes()[d] != 1) batch_strides[missing + d] = x.strides()[d];
  }
  Shape matrix_strides{x.strides()[x.dim() - 2], x.strides()[x.dim() - 1]};
  if (std::optional<int64_t> stride = folded_stride(batch, batch_strides, batch.size())) {
    return make_view(x, {batch.numel(), rows, cols}, {*stride, matrix_strides[0], matrix_strides[1]},
                     x.storage_offset());
  }
  Shape sizes = batch, strides = batch_strides;
  sizes.push_back(rows);
  sizes.push_back(cols);
  strides.push_back(matrix_strides[0]);
  strides.push_back(matrix_strides[1]);
  Tensor copy = contiguous_copy(make_view(x, sizes, strides, x.storage_offset()));
  Shape folded{batch.numel(), rows, cols};
  return make_view(copy, folded, contiguous_strides(folded), copy.storage_offset());
}

// The 2-D (or more) form the kernel sees: a 1-D left operand is one row, a 1-D right
// operand one column.
Shape matrix_sizes(const Shape& sizes, bool is_left) {
  Shape result = sizes;
  if (sizes.size() == 1) result.insert(is_left ? 0 : 1, 1);
  return result;
}
Tensor as_matrix(const Tensor& x, bool is_left) {
  return x.dim() == 1 ? unsqueezed(x, is_left ? 0 : 1) : x;
}

Shape batch_sizes(const Shape& matrix) { return Shape(matrix.begin(), matrix.end() - 2); }

// The gradient of an operand of `operand_sizes` from its per-batch gradient (B, R, C)
// (contiguous): summed over the batch dims the operand was broadcast along.
Tensor reduce_to_operand(const Tensor& per_batch, const Shape& batch, const Shape& operand_sizes, bool is_left) {
  Shape full = batch;
  full.push_back(per_batch.sizes()[1]);
  full.push_back(per_batch.sizes()[2]);
  Tensor summed = sum_to_size(make_view(per_batch, full, contiguous_strides(full), per_batch.storage_offset()),
                              matrix_sizes(operand_sizes, is_left));
  return summed.sizes() == operand_sizes ? summed : reshape(summed, operand_sizes);
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  autograd::check_defined(op, a);
  autograd::check_defined(op, b);
  autograd::check_same_device(op, a, b);
  autograd::check_floating(op, a);
  MG_CHECK(a.dtype() == b.dtype(), op, ": both operands must have the same dtype, got ", a.dtype(), " (shape ",
           a.sizes(), ") and ", b.dtype(), " (shape ", b.sizes(), "). Hint: convert one to the other's dtype "
           "with .to(other.dtype()).");
}

// matmul in the operands' own dtypes (what autocast hands it, or the caller's).
Tensor matmul_in_given_dtypes(const Tensor& a, const Tensor& b) {
  check_operands("matmul", a, b);
  MG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dimension, got shapes ",
           a.sizes(), " and ", b.sizes(), ". Hint: multiply by a scalar with mul() instead.");
  Shape a_matrix = matrix_sizes(a.sizes(), true), b_matrix = matrix_sizes(b.sizes(), false);
  int64_t m = a_matrix[a_matrix.size() - 2], k = a_matrix.back(), n = b_matrix.back();
  int64_t b_rows = b_matrix[b_matrix.size() - 2];
  MG_CHECK(k == b_rows, "matmul: shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (", k,
           " != ", b_rows, ")");
  Shape batch;
  try {
    batch = broadcast_shapes(batch_sizes(a_matrix), batch_sizes(b_matrix));
  } catch (const Error& error) {
    MG_CHECK(false, "matmul: the batch dims of shapes ", a.sizes(), " and ", b.sizes(), " do not broadcast: ",
             error.what());
  }

  Shape out_sizes = batch;  // batch + (M) + (N), without the dims 1-D operands lacked
  if (a.dim() > 1) out_sizes.push_back(m);
  if (b.dim() > 1) out_sizes.push_back(n);
  Tensor out = autograd::kept_or_computed(OpKind::Matmul, "matmul", out_sizes, a.dtype(), [&] {
    Tensor product = new_output(out_sizes, a.dtype(), a);
    Shape out_3d{batch.numel(), m, n};
    kernels(a.device()).matmul(as_batched(as_matrix(a, true), batch), as_batched(as_matrix(b, false), batch),
                               make_view(product, out_3d, contiguous_strides(out_3d), product.storage_offset()));
    return product;
  });

  if (needs_grad(a, b)) {
    // Each gradient needs only the other operand.
    autograd::record(
        "MatmulBackward", out, {a, b}, autograd::saved(needs_grad(b) ? a : Tensor(), needs_grad(a) ? b : Tensor()),
        [batch, a_sizes = a.sizes(), b_sizes = b.sizes()](const Node& node, const Tensor& grad,
                                                           const Tensor& saved_a, const Tensor& saved_b) {
          // grad has the output's shape; give it back the dims 1-D operands lacked.
          Tensor grad_matrix = a_sizes.size() == 1 ? unsqueezed(grad, batch.size()) : grad;
          if (b_sizes.size() == 1) grad_matrix = unsqueezed(grad_matrix, grad_matrix.dim());
          Tensor grad_3d = as_batched(grad_matrix, batch);  // (B, M, N)
          const KernelTable& kernel = kernels(grad.device());
          int64_t batches = grad_3d.sizes()[0], m = grad_3d.sizes()[1], n = grad_3d.sizes()[2];
          Tensor grad_a, grad_b;
          if (node.needs_input_grad(0)) {
            Tensor b_3d = as_batched(as_matrix(saved_b, false), batch);  // (B, K, N)
            int64_t k = b_3d.sizes()[1];
            Tensor per_batch = new_output({batches, m, k}, grad.dtype(), grad);
            kernel.matmul(grad_3d, transposed(b_3d), per_batch);
            grad_a = reduce_to_operand(per_batch, batch, a_sizes, true);
          }
          if (node.needs_input_grad(1)) {
            Tensor a_3d = as_batched(as_matrix(saved_a, true), batch);  // (B, M, K)
            int64_t k = a_3d.sizes()[2];
            if (b_sizes.size() <= 2) {
              // NOTE: b (a weight, say) repeats over the batch; summing B products of
              // (K, M) @ (M, N) is one product (K, B*M) @ (B*M, N), which needs no
              // (B, K, N) temporary of B weight-sized gradients.
              Tensor grad_b_3d = new_output({1, k, n}, grad.dtype(), grad);
              kernel.matmul(transposed(as_rows(a_3d)), as_rows(grad_3d), grad_b_3d);
              grad_b = make_view(grad_b_3d, b_sizes, contiguous_strides(b_sizes), grad_b_3d.storage_offset());
            } else {
              Tensor per_batch = new_output({batches, k, n}, grad.dtype(), grad);
              kernel.matmul(transposed(a_3d), grad_3d, per_batch);
              grad_b = reduce_to_operand(per_batch, batch, b_sizes, false);
            }
          }
          return std::vector<Tensor>{grad_a, grad_b};
        });
  }
  return out;
}

// linear in the operands' own dtypes.
Tensor linear_in_given_dtypes(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands("linear", x, weight);
  MG_CHECK(weight.dim() == 2, "linear: weight must be 2-D (out_features, in_features), got shape ",
           weight.sizes());
  MG_CHECK(x.dim() >= 1, "linear: input must have at least 1 dimension (*, in_features), got a 0-d tensor");
  int64_t out_features = weight.sizes()[0], in_features = weight.sizes()[1];
  MG_CHECK(x.sizes().back() == in_features, "linear: input has ", x.sizes().back(), " features (shape ",
           x.sizes(), ") but weight expects ", in_features, " (shape ", weight.sizes(), ")");
  if (bias.defined()) {
    autograd::check_same_device("linear", x, bias);
    MG_CHECK(bias.dtype() == x.dtype(), "linear: bias has dtype ", bias.dtype(), " but input has ", x.dtype(),
             ". Hint: convert it with bias.to(input.dtype()).");
    MG_CHECK(bias.dim() == 1 && bias.sizes()[0] == out_features, "linear: bias has shape ", bias.sizes(),
             " but weight (shape ", weight.sizes(), ") has ", out_features, " output features; expected [",
             out_features, "]");
  }

  Shape out_sizes = x.sizes();
  out_sizes[out_sizes.size() - 1] = out_features;
  Tensor out = autograd::kept_or_computed(OpKind::Matmul, "linear", out_sizes, x.dtype(), [&] {
    Tensor product = new_output(out_sizes, x.dtype(), x);
    autograd::linear_into(kernels(x.device()), x, weight, bias, product);
    return product;
  });

  if (needs_grad(x, weight, bias)) {
    autograd::record(
        "LinearBackward", out, {x, weight, bias},
        autograd::saved(needs_grad(weight) ? x : Tensor(), needs_grad(x) ? weight : Tensor()),
        [x_sizes = x.sizes()](const Node& node, const Tensor& grad, const Tensor& saved_x,
                               const Tensor& saved_weight) {
          const KernelTable& kernel = kernels(grad.device());
          Tensor grad_rows = as_rows(grad);  // (1, N, out)
          Tensor grad_x, grad_weight, grad_bias;
          if (node.needs_input_grad(0)) {
            grad_x = new_output(x_sizes, grad.dtype(), grad);
            kernel.matmul(grad_rows, unsqueezed(saved_weight, 0), as_rows(grad_x));  // (N, out) @ (out, in)
          }
          if (node.needs_input_grad(1)) {
            Shape weight_sizes{grad_rows.sizes()[2], saved_x.sizes().back()};
            grad_weight = new_output(weight_sizes, grad.dtype(), grad);
            kernel.matmul(transposed(grad_rows), as_rows(saved_x), unsqueezed(grad_weight, 0));  // (out, N) @ (N, in)
          }
          if (node.needs_input_grad(2)) grad_bias = sum_to_size(grad, {grad.sizes().back()});
          return std::vector<Tensor>{grad_x, grad_weight, grad_bias};
        });
  }
  return out;
}

}  // namespace

// Products run in the autocast dtype inside an autocast region (autocast/cast_policy.h): they are
// where 16 bits buy the speed (tensor cores) and halve the saved activations.
Tensor matmul(const Tensor& a, const Tensor& b) {
  if (amp::is_autocast_on_for(a)) {
    return matmul_in_given_dtypes(amp::cast_to_autocast_dtype(a), amp::cast_to_autocast_dtype(b));
  }
  return matmul_in_given_dtypes(a, b);
}

Tensor Tensor::matmul(const Tensor& other) const { return mg::matmul(*this, other); }

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (amp::is_autocast_on_for(x)) {
    return linear_in_given_dtypes(amp::cast_to_autocast_dtype(x), amp::cast_to_autocast_dtype(weight),
                                  amp::cast_to_autocast_dtype(bias));
  }
  return linear_in_given_dtypes(x, weight, bias);
}

}  // namespace mg
