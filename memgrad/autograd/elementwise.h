// autograd/elementwise.h — differentiable elementwise ops of two operands (or a tensor and
// a scalar) with NumPy broadcasting and PyTorch's type promotion (integer / integer divides
// in float32), and comparisons (no gradient, bool result). The ops of one tensor (exp,
// relu, gelu, ...) and unary minus are in autograd/unary.h.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// relu(a + b) in one pass each way (a residual block's end): one node, which saves only its
// output, as relu does.
Tensor add_relu(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor rdiv(double a, const Tensor& b);  // a / b
Tensor pow(const Tensor& base, double exponent);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return rdiv(a, b); }

// Sums `grad` over the dimensions that broadcasting expanded, giving `sizes` (the
// gradient of a broadcast input).
Tensor sum_to_size(const Tensor& grad, const Shape& sizes);

}  // namespace mg
