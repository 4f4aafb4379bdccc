// autograd/reduce.cpp — reduce.h's sum, mean, max/amax over all or some dims, and argmax,
// with their Tensor methods (declared in core/tensor.h): forward and backward side by side.
//
// Every reduction allocates its output once, in keepdim form (size 1 in each reduced
// dim), which is what the kernel fills; without keepdim the result is a view of those
// same bytes with the reduced dims dropped. Backward goes the other way: the gradient is
// viewed back in keepdim form and expanded (stride 0, no bytes) over the input.
#include "memgrad/autograd/reduce.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/shape.h"

namespace mg {

namespace {

using autograd::Node;
using autograd::needs_grad;
using autograd::record;
using autograd::saved;

// The shapes of one reduction of an input over some of its dims.
struct Reduction {
  Shape keepdim_sizes;  // the input's sizes with 1 in every reduced dim
  Shape result_sizes;   // keepdim_sizes, or without the reduced dims when !keepdim
  int64_t count = 1;    // input elements combined into each output element
};

// Wraps `dims` (negative counts from the end; an empty list means every dim, as in
// PyTorch) and rejects repeats.
Reduction plan_reduction(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  bool reduced[kMaxDims] = {};
  for (int64_t dim : dims) {
    int d = wrap_dim(dim, x.dim());
    MG_CHECK(!reduced[d], op, ": dimension ", d, " appears more than once in the dims to reduce (tensor of shape ",
             x.sizes(), ")");
    reduced[d] = true;
  }
  Reduction plan;
  for (int d = 0; d < x.dim(); ++d) {
    bool collapses = dims.empty() || reduced[d];
    plan.keepdim_sizes.push_back(collapses ? 1 : x.sizes()[d]);
    if (collapses) plan.count *= x.sizes()[d];
    if (!collapses || keepdim) plan.result_sizes.push_back(plan.keepdim_sizes[d]);
  }
  return plan;
}

// A keepdim-form output as the caller asked for it: without keepdim, a view of the same
// bytes with the reduced dims dropped.
Tensor as_result(const Tensor& keepdim_output, const Reduction& plan) {
  return make_view(keepdim_output, plan.result_sizes, contiguous_strides(plan.result_sizes), 0);
}

// The kernel's result for `plan`, as a new tensor of `dtype`.
Tensor reduce_into(ReduceOp op, const Tensor& x, const Reduction& plan, DType dtype) {
  Tensor output = autograd::new_output(plan.keepdim_sizes, dtype, x);
  kernels(x.device()).reduce(op, x, output);
  return as_result(output, plan);
}

// The gradient of an output of `plan`, spread over the input: a stride-0 view.
Tensor expand_to_input(const Tensor& grad, const Shape& keepdim_sizes, const Shape& input_sizes) {
  return expand(reshape(grad, keepdim_sizes), input_sizes);
}

// max and min have no identity to fall back on: every reduced dim must hold an element.
void check_nonempty_reduction(const char* op, const Tensor& x, const Reduction& plan) {
  for (int d = 0; d < x.dim(); ++d) {
    MG_CHECK(x.sizes()[d] != 0 || plan.keepdim_sizes[d] != 1, op, ": cannot reduce over dimension ", d,
             " of size 0 (tensor of shape ", x.sizes(), "): the maximum of no elements is undefined. "
             "Hint: reduce over other dimensions, or check the input is not empty.");
  }
}

// amax for `op` (max or amax), recorded as node `name`.
Tensor amax_as(const char* op, const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Reduction plan = plan_reduction(op, x, dims, keepdim);
  check_nonempty_reduction(op, x, plan);
  Tensor output = reduce_into(ReduceOp::Max, x, plan, x.dtype());
  if (needs_grad(x)) {
    // Ties share the gradient evenly: grad * (x == max) / (number of maxima).
    record(name, output, {x}, saved(x, output),
           [keepdim_sizes = plan.keepdim_sizes, dims](const Node&, const Tensor& grad, const Tensor& input,
                                                      const Tensor& result) {
             Tensor is_max = eq(input, reshape(result, keepdim_sizes));  // bool, input's sizes
             Tensor ties = sum(is_max, dims, /*keepdim=*/true);          // int64, keepdim form
             return std::vector<Tensor>{mul(is_max, div(reshape(grad, keepdim_sizes), ties))};
           });
  }
  return output;
}

// Indices (int64) of x's maximum along dim d, as the caller asked for them.
Tensor argmax_along(const Tensor& x, int d, const Reduction& plan) {
  Tensor indices = autograd::new_output(plan.keepdim_sizes, DType::Int64, x);
  kernels(x.device()).argmax(x, d, indices);
  return as_result(indices, plan);
}

// sum and mean in the input's own dtype (what autocast hands them, or the caller's).
Tensor sum_in_given_dtype(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Reduction plan = plan_reduction("sum", x, dims, keepdim);
  // As in PyTorch, integer and bool sums widen to int64 so they do not overflow.
  DType dtype = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  Tensor output = reduce_into(ReduceOp::Sum, x, plan, dtype);
  if (needs_grad(x)) {
    record("SumBackward", output, {x}, saved(),
           [keepdim_sizes = plan.keepdim_sizes, input_sizes = x.sizes()](const Node&, const Tensor& grad) {
             return std::vector<Tensor>{expand_to_input(grad, keepdim_sizes, input_sizes)};
           });
  }
  return output;
}

Tensor mean_in_given_dtype(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  autograd::check_floating("mean", x);
  Reduction plan = plan_reduction("mean", x, dims, keepdim);
  Tensor output = reduce_into(ReduceOp::Sum, x, plan, x.dtype());
  // In place on the fresh output: a mean costs one tensor, like a sum. Over no elements
  // this gives NaN, as in PyTorch.
  kernels(x.device()).binary_scalar(BinaryOp::Div, output, static_cast<double>(plan.count), output);
  if (needs_grad(x)) {
    record("MeanBackward", output, {x}, saved(),
           [keepdim_sizes = plan.keepdim_sizes, input_sizes = x.sizes(), count = plan.count](const Node&,
                                                                                           const Tensor& grad) {
             Tensor grad_share = div(grad, static_cast<double>(count));  // output's sizes
             return std::vector<Tensor>{expand_to_input(grad_share, keepdim_sizes, input_sizes)};
           });
  }
  return output;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

// Autocast (autocast/cast_policy.h) sums in float32: a long sum of 16-bit values loses the small
// terms (bfloat16 keeps 8 bits of mantissa) and overflows float16.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (amp::is_autocast_on_for(x)) return sum_in_given_dtype(amp::cast_to_float32(x), dims, keepdim);
  return sum_in_given_dtype(x, dims, keepdim);
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (amp::is_autocast_on_for(x)) return mean_in_given_dtype(amp::cast_to_float32(x), dims, keepdim);
  return mean_in_given_dtype(x, dims, keepdim);
}

Tensor max(const Tensor& x) { return amax_as("max", "MaxBackward", x, {}, false); }

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return amax_as("amax", "AmaxBackward", x, dims, keepdim);
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  int d = wrap_dim(dim, x.dim());
  // A 0-d tensor is its own maximum along its one implicit dim; the kernels want a dim.
  if (x.dim() == 0) return max(reshape(x, {1}), 0, false);
  Reduction plan = plan_reduction("max", x, {d}, keepdim);
  check_nonempty_reduction("max", x, plan);
  Tensor values = reduce_into(ReduceOp::Max, x, plan, x.dtype());
  Tensor indices = argmax_along(x, d, plan);
  if (needs_grad(x)) {
    // The gradient goes to the chosen index only: grad * (position along d == index).
    record("MaxBackward", values, {x}, saved(indices),
           [keepdim_sizes = plan.keepdim_sizes, d, size = x.sizes()[d]](const Node&, const Tensor& grad,
                                                                       const Tensor& saved_indices) {
             Shape position_sizes = Shape::filled(keepdim_sizes.size(), 1);
             position_sizes[d] = size;
             Tensor positions = arange(static_cast<double>(size), {.dtype = DType::Int64, .device = grad.device()})
                                    .view(position_sizes);
             Tensor is_chosen = eq(positions, reshape(saved_indices, keepdim_sizes));  // bool, input's sizes
             return std::vector<Tensor>{mul(is_chosen, reshape(grad, keepdim_sizes))};
           });
  }
  return {values, indices};
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  int d = wrap_dim(dim, x.dim());
  if (x.dim() == 0) return argmax(reshape(x, {1}), 0, false);
  Reduction plan = plan_reduction("argmax", x, {d}, keepdim);
  check_nonempty_reduction("argmax", x, plan);
  return argmax_along(x, d, plan);
}

// ---- Tensor methods ----

Tensor Tensor::sum() const { return mg::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return mg::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return mg::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return mg::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return mg::max(*this); }
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return mg::amax(*this, dims, keepdim);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return mg::argmax(*this, dim, keepdim); }

}  // namespace mg
