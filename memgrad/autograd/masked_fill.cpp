// autograd/masked_fill.cpp — masked_fill.h's masked_fill, and tril/triu built on it,
// forward and backward side by side.
//
// masked_fill writes `value` where a bool mask (broadcast to x's sizes) is true. Its
// backward is the same op on the gradient with 0: the filled entries do not depend on x.
// It saves only the mask (1 byte an element, often a broadcast (T, T) causal mask that is
// far smaller than x). tril and triu are masked_fill with a mask from index comparisons,
// so their gradient comes from masked_fill's.
#include "memgrad/autograd/masked_fill.h"

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

using autograd::broadcasts_to;
using autograd::Node;
using autograd::needs_grad;
using autograd::record;
using autograd::saved;

// The kernel's result: x's sizes, contiguous, x's dtype.
Tensor masked_fill_output(const Tensor& x, const Tensor& mask, double value) {
  Tensor output = autograd::new_output(x.sizes(), x.dtype(), x);
  kernels(x.device()).masked_fill(x, mask, value, output);
  return output;
}

// The mask of entries outside the band kept by tril (keep_lower) or triu: a bool
// (rows, cols) tensor on `device`, true where the entry is zeroed.
Tensor outside_triangle(int64_t rows, int64_t cols, int64_t diagonal, bool keep_lower, Device device) {
  TensorOptions index_options{.dtype = DType::Int64, .device = device};
  Tensor row = arange(static_cast<double>(rows), index_options).view({rows, 1});
  Tensor col = arange(static_cast<double>(cols), index_options).view({1, cols});
  Tensor offset = sub(col, row);  // (rows, cols): col - row
  double bound = static_cast<double>(diagonal);
  return keep_lower ? gt(offset, bound) : lt(offset, bound);
}

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool keep_lower) {
  autograd::check_defined(op, x);
  MG_CHECK(x.dim() >= 2, op, ": expected a tensor of at least 2 dimensions (the matrix is the last two), got shape ",
           x.sizes(), ". Hint: unsqueeze a vector into a (1, n) row first.");
  int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  return masked_fill(x, outside_triangle(rows, cols, diagonal, keep_lower, x.device()), 0.0);
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  autograd::check_defined("masked_fill", x);
  autograd::check_defined("masked_fill", mask);
  MG_CHECK(mask.dtype() == DType::Bool, "masked_fill: the mask must be bool, got ", mask.dtype(), " of shape ",
           mask.sizes(), ". Hint: build it with a comparison (e.g. mg::eq(x, 0)) or convert with "
           ".to(mg::DType::Bool).");
  autograd::check_same_device("masked_fill", x, mask);
  MG_CHECK(broadcasts_to(mask.sizes(), x.sizes()), "masked_fill: the mask of shape ", mask.sizes(),
           " does not broadcast to the input's shape ", x.sizes(),
           ". Hint: each mask dimension must be 1 or equal the input's (trailing dimensions aligned), "
           "and the mask cannot have more dimensions than the input.");
  Tensor output = masked_fill_output(x, mask, value);
  if (needs_grad(x)) {
    record("MaskedFillBackward", output, {x}, saved(mask),
           [](const Node&, const Tensor& grad, const Tensor& saved_mask) {
             return std::vector<Tensor>{masked_fill_output(grad, saved_mask, 0.0)};
           });
  }
  return output;
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, /*keep_lower=*/true); }

Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, /*keep_lower=*/false); }

}  // namespace mg
