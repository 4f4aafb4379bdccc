// autograd/unary.h — differentiable elementwise ops of one tensor: math (neg, exp, log,
// sqrt, abs, erf) and activations (relu, sigmoid, tanh, gelu). The ops of two operands, or of a
// tensor and a scalar (pow among them), are in autograd/elementwise.h.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
// GELU as torch.nn.functional.gelu: the exact (erf) form by default, or its tanh
// approximation (GPT-2's "gelu_new"). Saves its input.
enum class GeluApproximate { None, Tanh };
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::None);
// The error function, as torch.erf. Saves its input.
Tensor erf(const Tensor& x);

inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace mg
