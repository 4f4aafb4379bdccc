// autograd/unary.cpp — unary.h's math (neg, exp, log, sqrt, abs, erf) and activations (relu,
// sigmoid, tanh, gelu), with their Tensor methods (declared in core/tensor.h): forward and
// backward side by side.
//
// Each saves the one tensor its gradient needs. Where the gradient is a function of the
// output (exp, sqrt, relu, sigmoid, tanh), the output is saved: the next op usually keeps
// it alive anyway, so the saved bytes are often free, and the input can be released.
#include "memgrad/autograd/unary.h"

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

using autograd::fused_gradient;
using autograd::needs_grad;
using autograd::Node;
using autograd::record;
using autograd::saved;

namespace {

using Gradients = std::vector<Tensor>;

Tensor unary_output(UnaryOp op, const Tensor& x) {
  Tensor output = autograd::new_elementwise_output(x.sizes(), x.dtype(), {x});
  kernels(x.device()).unary(op, x, output);
  return output;
}

// A floating-point op's output, after checking its input.
Tensor floating_unary_output(const char* op_name, UnaryOp op, const Tensor& x) {
  autograd::check_defined(op_name, x);
  autograd::check_floating(op_name, x);
  return unary_output(op, x);
}

}  // namespace

Tensor neg(const Tensor& x) {
  autograd::check_defined("neg", x);
  Tensor output = unary_output(UnaryOp::Neg, x);
  if (needs_grad(x)) {
    record("NegBackward", output, {x}, saved(), [](const Node&, const Tensor& grad) { return Gradients{neg(grad)}; });
  }
  return output;
}

Tensor exp(const Tensor& x) {
  Tensor output = floating_unary_output("exp", UnaryOp::Exp, x);
  if (needs_grad(x)) {
    record("ExpBackward", output, {x}, saved(output),
           [](const Node&, const Tensor& grad, const Tensor& saved_output) {
             return Gradients{mul(grad, saved_output)};
           });
  }
  return output;
}

Tensor log(const Tensor& x) {
  Tensor output = floating_unary_output("log", UnaryOp::Log, x);
  if (needs_grad(x)) {
    record("LogBackward", output, {x}, saved(x),
           [](const Node&, const Tensor& grad, const Tensor& saved_input) {
             return Gradients{div(grad, saved_input)};
           });
  }
  return output;
}

Tensor sqrt(const Tensor& x) {
  Tensor output = floating_unary_output("sqrt", UnaryOp::Sqrt, x);
  if (needs_grad(x)) {
    // d sqrt(x)/dx = 1 / (2 sqrt(x))
    record("SqrtBackward", output, {x}, saved(output),
           [](const Node&, const Tensor& grad, const Tensor& saved_output) {
             return Gradients{div(grad, mul(saved_output, 2.0))};
           });
  }
  return output;
}

Tensor abs(const Tensor& x) {
  autograd::check_defined("abs", x);
  Tensor output = unary_output(UnaryOp::Abs, x);
  if (needs_grad(x)) {
    // The gradient is grad * sign(x); the sign is computed in backward rather than saved,
    // so the forward allocates nothing beyond its output.
    record("AbsBackward", output, {x}, saved(x), [](const Node&, const Tensor& grad, const Tensor& saved_input) {
      return Gradients{mul(grad, unary_output(UnaryOp::Sign, saved_input))};
    });
  }
  return output;
}

Tensor relu(const Tensor& x) {
  autograd::check_defined("relu", x);
  Tensor output = unary_output(UnaryOp::Relu, x);
  if (needs_grad(x)) {
    record("ReluBackward", output, {x}, saved(output),
           [](const Node&, const Tensor& grad, const Tensor& saved_output) {
             return Gradients{fused_gradient(BinaryOp::ReluBackward, grad, saved_output)};
           });
  }
  return output;
}

Tensor sigmoid(const Tensor& x) {
  Tensor output = floating_unary_output("sigmoid", UnaryOp::Sigmoid, x);
  if (needs_grad(x)) {
    record("SigmoidBackward", output, {x}, saved(output),
           [](const Node&, const Tensor& grad, const Tensor& saved_output) {
             return Gradients{fused_gradient(BinaryOp::SigmoidBackward, grad, saved_output)};
           });
  }
  return output;
}

Tensor tanh(const Tensor& x) {
  Tensor output = floating_unary_output("tanh", UnaryOp::Tanh, x);
  if (needs_grad(x)) {
    record("TanhBackward", output, {x}, saved(output),
           [](const Node&, const Tensor& grad, const Tensor& saved_output) {
             return Gradients{fused_gradient(BinaryOp::TanhBackward, grad, saved_output)};
           });
  }
  return output;
}

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  bool tanh_form = approximate == GeluApproximate::Tanh;
  Tensor output = floating_unary_output("gelu", tanh_form ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
  if (needs_grad(x)) {
    // gelu's derivative is not a function of its output, so it keeps the input.
    BinaryOp backward = tanh_form ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward;
    record(tanh_form ? "GeluTanhBackward" : "GeluBackward", output, {x}, saved(x),
           [backward](const Node&, const Tensor& grad, const Tensor& saved_input) {
             return Gradients{fused_gradient(backward, grad, saved_input)};
           });
  }
  return output;
}

Tensor erf(const Tensor& x) {
  Tensor output = floating_unary_output("erf", UnaryOp::Erf, x);
  if (needs_grad(x)) {
    record("ErfBackward", output, {x}, saved(x), [](const Node&, const Tensor& grad, const Tensor& saved_input) {
      return Gradients{fused_gradient(BinaryOp::ErfBackward, grad, saved_input)};
    });
  }
  return output;
}

Tensor Tensor::neg() const { return mg::neg(*this); }
Tensor Tensor::exp() const { return mg::exp(*this); }
Tensor Tensor::log() const { return mg::log(*this); }
Tensor Tensor::sqrt() const { return mg::sqrt(*this); }
Tensor Tensor::abs() const { return mg::abs(*this); }
Tensor Tensor::relu() const { return mg::relu(*this); }
Tensor Tensor::sigmoid() const { return mg::sigmoid(*this); }
Tensor Tensor::tanh() const { return mg::tanh(*this); }

}  // namespace mg
