// autograd/elementwise.cpp — binary and scalar arithmetic, maximum/minimum, comparisons,
// and sum_to_size: forward and backward side by side. (Unary math and activations live in
// unary.cpp.)
//
// Binary ops broadcast (NumPy rules) and promote dtypes (PyTorch rules). An input whose
// dtype differs from the result's is converted with the differentiable mg::to, so its
// gradient arrives converted back to its own dtype; the gradient of a broadcast input is
// summed back to its shape with sum_to_size.
#include "memgrad/autograd/elementwise.h"

#include <cmath>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"

namespace mg {

using autograd::needs_grad;
using autograd::Node;
using autograd::record;
using autograd::saved;

namespace {

using Gradients = std::vector<Tensor>;

// The broadcast shape of a binary op's result; the error names the op and both shapes.
Shape broadcast_sizes(const char* op, const Tensor& a, const Tensor& b) {
  autograd::check_defined(op, a);
  autograd::check_defined(op, b);
  autograd::check_same_device(op, a, b);
  try {
    return broadcast_shapes(a.sizes(), b.sizes());
  } catch (const Error& error) {
    detail::throw_error(detail::str_cat(op, ": ", error.what()));
  }
}

// A binary op's operands converted (differentiably) to the result dtype, and the result's
// shape. `true_division`: integer operands give a float32 result, as in PyTorch.
struct Operands {
  Tensor a;
  Tensor b;
  Shape sizes;
  DType dtype;
};

Operands promote_operands(const char* op, const Tensor& a, const Tensor& b, bool true_division = false) {
  Shape sizes = broadcast_sizes(op, a, b);
  DType dtype = promote_types(a.dtype(), b.dtype());
  if (true_division && !is_floating(dtype)) dtype = DType::Float32;
  return {to(a, dtype), to(b, dtype), sizes, dtype};
}

Tensor binary_output(BinaryOp op, const Operands& operands) {
  Tensor output = autograd::new_elementwise_output(operands.sizes, operands.dtype, {operands.a, operands.b});
  kernels(output.device()).binary(op, operands.a, operands.b, output);
  return output;
}

// The dtype of `tensor op scalar`: the tensor's, except that an integer or bool tensor
// with a fractional scalar, or divided, gives float32 (PyTorch), and bool arithmetic
// with an integer scalar gives int64.
DType scalar_result_dtype(BinaryOp op, DType dtype, double scalar) {
  if (is_floating(dtype)) return dtype;
  if (op == BinaryOp::Div || scalar != std::trunc(scalar)) return DType::Float32;
  return dtype == DType::Bool ? DType::Int64 : dtype;
}

// `x op scalar` with x converted (differentiably) to `dtype`; returns {converted x, result}.
std::pair<Tensor, Tensor> scalar_output(const char* op_name, BinaryOp op, const Tensor& x, double scalar) {
  autograd::check_defined(op_name, x);
  Tensor input = to(x, scalar_result_dtype(op, x.dtype(), scalar));
  Tensor output = autograd::new_elementwise_output(input.sizes(), input.dtype(), {input});
  kernels(output.device()).binary_scalar(op, input, scalar, output);
  return {input, output};
}

// `scalar op x` for the non-commutative ops (rsub, rdiv): the scalar becomes a 0-d tensor
// that the kernel broadcasts, so the result takes one kernel and one output buffer.
std::pair<Tensor, Tensor> reversed_scalar_output(const char* op_name, BinaryOp op, double scalar, const Tensor& x) {
  autograd::check_defined(op_name, x);
  Tensor input = to(x, scalar_result_dtype(op, x.dtype(), scalar));
  Tensor scalar_tensor = full({}, scalar, {.dtype = input.dtype(), .device = input.device()});
  Tensor output = autograd::new_elementwise_output(input.sizes(), input.dtype(), {input});
  kernels(output.device()).binary(op, scalar_tensor, input, output);
  return {input, output};
}

// x itself, or a copy converted to dtype: comparisons record nothing, so they convert
// without autograd.
Tensor converted(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : converted_copy(x, dtype, x.device());
}

Tensor compare(const char* op, BinaryOp comparison, const Tensor& a, const Tensor& b) {
  Shape sizes = broadcast_sizes(op, a, b);
  DType dtype = promote_types(a.dtype(), b.dtype());
  Tensor output = autograd::new_elementwise_output(sizes, DType::Bool, {a, b});
  kernels(a.device()).binary(comparison, converted(a, dtype), converted(b, dtype), output);
  return output;
}

Tensor compare(const char* op, BinaryOp comparison, const Tensor& a, double b) {
  autograd::check_defined(op, a);
  Tensor output = autograd::new_elementwise_output(a.sizes(), DType::Bool, {a});
  kernels(a.device()).binary_scalar(comparison, a, b, output);
  return output;
}

using Comparison = Tensor (*)(const Tensor&, const Tensor&);

// Weight of `a` in the gradient of maximum (wins = gt) or minimum (wins = lt): 1 where `a`
// wins, 0 where `b` wins, and 0.5 at ties, where PyTorch splits the gradient evenly.
Tensor winner_weight(Comparison wins, const Tensor& a, const Tensor& b) {
  Tensor won = to(wins(a, b), a.dtype());
  Tensor tied = to(eq(a, b), a.dtype());
  return add(won, mul(tied, 0.5));
}

Tensor extremum(const char* op, const char* backward_name, BinaryOp op_kind, Comparison wins, const Tensor& a_in,
                const Tensor& b_in) {
  Operands operands = promote_operands(op, a_in, b_in);
  Tensor output = binary_output(op_kind, operands);
  const Tensor& a = operands.a;
  const Tensor& b = operands.b;
  if (needs_grad(a, b)) {
    record(backward_name, output, {a, b}, saved(a, b),
           [wins, a_sizes = a.sizes(), b_sizes = b.sizes()](const Node& node, const Tensor& grad,
                                                             const Tensor& saved_a, const Tensor& saved_b) {
             Tensor weight_a = winner_weight(wins, saved_a, saved_b);
             return Gradients{
                 node.needs_input_grad(0) ? sum_to_size(mul(grad, weight_a), a_sizes) : Tensor(),
                 node.needs_input_grad(1) ? sum_to_size(mul(grad, rsub(1.0, weight_a)), b_sizes) : Tensor()};
           });
  }
  return output;
}

}  // namespace

Tensor sum_to_size(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  int leading = grad.dim() - sizes.size();
  MG_ASSERT(leading >= 0, "sum_to_size: cannot sum a gradient of shape ", grad.sizes(), " to ", sizes);
  std::vector<int64_t> dims;
  for (int d = 0; d < leading; ++d) dims.push_back(d);
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1 && grad.sizes()[leading + d] != 1) dims.push_back(leading + d);
  }
  // keepdim, then a reshape drops the leading size-1 dims.
  Tensor summed = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return summed.sizes() == sizes ? summed : reshape(summed, sizes);
}

// ---- binary arithmetic ----

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  Operands operands = promote_operands("add", a_in, b_in);
  Tensor output = binary_output(BinaryOp::Add, operands);
  if (needs_grad(operands.a, operands.b)) {
    record("AddBackward", output, {operands.a, operands.b}, saved(),
           [a_sizes = operands.a.sizes(), b_sizes = operands.b.sizes()](const Node& node, const Tensor& grad) {
             return Gradients{node.needs_input_grad(0) ? sum_to_size(grad, a_sizes) : Tensor(),
                              node.needs_input_grad(1) ? sum_to_size(grad, b_sizes) : Tensor()};
           });
  }
  return output;
}

Tensor add_relu(const Tensor& a_in, const Tensor& b_in) {
  Operands operands = promote_operands("add_relu", a_in, b_in);
  Tensor output = binary_output(BinaryOp::AddRelu, operands);
  if (needs_grad(operands.a, operands.b)) {
    record("AddReluBackward", output, {operands.a, operands.b}, saved(output),
           [a_sizes = operands.a.sizes(), b_sizes = operands.b.sizes()](const Node& node, const Tensor& grad,
                                                                         const Tensor& saved_output) {
             Tensor through = autograd::fused_gradient(BinaryOp::ReluBackward, grad, saved_output);
             return Gradients{node.needs_input_grad(0) ? sum_to_size(through, a_sizes) : Tensor(),
                              node.needs_input_grad(1) ? sum_to_size(through, b_sizes) : Tensor()};
           });
  }
  return output;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  Operands operands = promote_operands("sub", a_in, b_in);
  Tensor output = binary_output(BinaryOp::Sub, operands);
  if (needs_grad(operands.a, operands.b)) {
    record("SubBackward", output, {operands.a, operands.b}, saved(),
           [a_sizes = operands.a.sizes(), b_sizes = operands.b.sizes()](const Node& node, const Tensor& grad) {
             return Gradients{node.needs_input_grad(0) ? sum_to_size(grad, a_sizes) : Tensor(),
                              node.needs_input_grad(1) ? neg(sum_to_size(grad, b_sizes)) : Tensor()};
           });
  }
  return output;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  Operands operands = promote_operands("mul", a_in, b_in);
  Tensor output = binary_output(BinaryOp::Mul, operands);
  const Tensor& a = operands.a;
  const Tensor& b = operands.b;
  if (needs_grad(a, b)) {
    // Each operand is needed only for the other's gradient: a weight times a frozen input
    // keeps neither alive for backward.
    record("MulBackward", output, {a, b}, saved(b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()),
           [a_sizes = a.sizes(), b_sizes = b.sizes()](const Node& node, const Tensor& grad, const Tensor& saved_a,
                                                      const Tensor& saved_b) {
             return Gradients{node.needs_input_grad(0) ? sum_to_size(mul(grad, saved_b), a_sizes) : Tensor(),
                              node.needs_input_grad(1) ? sum_to_size(mul(grad, saved_a), b_sizes) : Tensor()};
           });
  }
  return output;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  Operands operands = promote_operands("div", a_in, b_in, /*true_division=*/true);
  Tensor output = binary_output(BinaryOp::Div, operands);
  const Tensor& a = operands.a;
  const Tensor& b = operands.b;
  if (needs_grad(a, b)) {
    // d(a/b)/da = 1/b needs b; d(a/b)/db = -a/b^2 needs both.
    record("DivBackward", output, {a, b}, saved(b.requires_grad() ? a : Tensor(), b),
           [a_sizes = a.sizes(), b_sizes = b.sizes()](const Node& node, const Tensor& grad, const Tensor& saved_a,
                                                      const Tensor& saved_b) {
             Tensor grad_a = node.needs_input_grad(0) ? sum_to_size(div(grad, saved_b), a_sizes) : Tensor();
             Tensor grad_b = node.needs_input_grad(1)
                                 ? neg(sum_to_size(div(mul(grad, saved_a), mul(saved_b, saved_b)), b_sizes))
                                 : Tensor();
             return Gradients{grad_a, grad_b};
           });
  }
  return output;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum("maximum", "MaximumBackward", BinaryOp::Maximum, gt, a, b);
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum("minimum", "MinimumBackward", BinaryOp::Minimum, lt, a, b);
}

// ---- with a scalar ----

Tensor add(const Tensor& a, double b) {
  auto [input, output] = scalar_output("add", BinaryOp::Add, a, b);
  if (needs_grad(input)) {
    record("AddBackward", output, {input}, saved(),
           [](const Node&, const Tensor& grad) { return Gradients{grad}; });
  }
  return output;
}

Tensor sub(const Tensor& a, double b) {
  auto [input, output] = scalar_output("sub", BinaryOp::Sub, a, b);
  if (needs_grad(input)) {
    record("SubBackward", output, {input}, saved(),
           [](const Node&, const Tensor& grad) { return Gradients{grad}; });
  }
  return output;
}

Tensor mul(const Tensor& a, double b) {
  auto [input, output] = scalar_output("mul", BinaryOp::Mul, a, b);
  if (needs_grad(input)) {
    record("MulBackward", output, {input}, saved(),
           [b](const Node&, const Tensor& grad) { return Gradients{mul(grad, b)}; });
  }
  return output;
}

Tensor div(const Tensor& a, double b) {
  auto [input, output] = scalar_output("div", BinaryOp::Div, a, b);
  if (needs_grad(input)) {
    record("DivBackward", output, {input}, saved(),
           [b](const Node&, const Tensor& grad) { return Gradients{div(grad, b)}; });
  }
  return output;
}

Tensor rsub(double a, const Tensor& b) {
  auto [input, output] = reversed_scalar_output("rsub", BinaryOp::Sub, a, b);
  if (needs_grad(input)) {
    record("RsubBackward", output, {input}, saved(),
           [](const Node&, const Tensor& grad) { return Gradients{neg(grad)}; });
  }
  return output;
}

Tensor rdiv(double a, const Tensor& b) {
  auto [input, output] = reversed_scalar_output("rdiv", BinaryOp::Div, a, b);
  if (needs_grad(input)) {
    // d(a/b)/db = -a/b^2
    record("RdivBackward", output, {input}, saved(input),
           [a](const Node&, const Tensor& grad, const Tensor& saved_b) {
             return Gradients{div(mul(grad, -a), mul(saved_b, saved_b))};
           });
  }
  return output;
}

Tensor pow(const Tensor& base, double exponent) {
  auto [input, output] = scalar_output("pow", BinaryOp::Pow, base, exponent);
  if (needs_grad(input)) {
    record("PowBackward", output, {input}, saved(input),
           [exponent](const Node&, const Tensor& grad, const Tensor& saved_base) {
             // x^0 is constant; computing 0 * x^-1 would give NaN at x = 0.
             if (exponent == 0.0) return Gradients{zeros_like(grad)};
             return Gradients{mul(grad, mul(pow(saved_base, exponent - 1.0), exponent))};
           });
  }
  return output;
}

Tensor Tensor::pow(double exponent) const { return mg::pow(*this, exponent); }

// ---- comparisons: bool results, no gradient ----

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, double b) { return compare("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, double b) { return compare("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, double b) { return compare("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, double b) { return compare("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, double b) { return compare("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, double b) { return compare("ge", BinaryOp::Ge, a, b); }

}  // namespace mg
