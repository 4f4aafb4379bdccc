// core/elementwise_ops.h — core room: every elementwise op's formula, written once.
//
// Each op is a functor on its compute type C (float for the 16-bit types; see each
// device's kernels for the integer cases), MG_HOST_DEVICE (core/host_device.h, with the
// math:: functions both devices call), so the CPU kernels
// (core/cpu/elementwise.cpp) and the CUDA kernels (cuda/kernels/elementwise.cu) apply the
// same arithmetic term by term. The two lists below name every op once; from them come
// the UnaryOp and BinaryOp enums (core/kernels.h), each device's dispatch from an op to
// its functor, is_comparison(), and the every-op test (tests/ops/every_op.h), which runs
// each op on every device and dtype the list allows. Adding an op: docs/adding_an_op.md.
#pragma once

#include <cstdint>
#include <numbers>
#include <type_traits>

#include "memgrad/core/host_device.h"

namespace mg::elementwise {

// ---- GELU: Phi(x) and phi(x) of the exact form, the tanh approximation and its
// derivative (constants computed in double, then rounded to C) ----

constexpr double kInvSqrt2 = 0.5 * std::numbers::sqrt2;                             // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;  // 1/sqrt(2 pi)
constexpr double kGeluTanhScale = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;     // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
constexpr double kTwoOverSqrtPi = 2.0 * std::numbers::inv_sqrtpi;                   // erf's derivative at 0

template <class C>
MG_HOST_DEVICE inline C gelu_cdf(C x) { return C(0.5) * (C(1) + math::erf(x * C(kInvSqrt2))); }
template <class C>
MG_HOST_DEVICE inline C gelu_pdf(C x) { return math::exp(C(-0.5) * x * x) * C(kInvSqrt2Pi); }

// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
template <class C>
MG_HOST_DEVICE inline C gelu_tanh(C x) {
  C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
  return C(0.5) * x * (C(1) + math::tanh(inner));
}
// d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u).
template <class C>
MG_HOST_DEVICE inline C gelu_tanh_derivative(C x) {
  C t = math::tanh(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
  C inner_derivative = C(kGeluTanhScale) * (C(1) + C(3 * kGeluTanhCubic) * x * x);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * inner_derivative;
}

// ---- unary ops ----

struct NegOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return -x; } };
struct ExpOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return math::exp(x); } };
struct LogOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return math::log(x); } };
struct SqrtOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return math::sqrt(x); } };
struct AbsOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return x < C(0) ? -x : x; } };
struct ReluOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return x > C(0) ? x : C(0); } };
struct SigmoidOp {
  template <class C> MG_HOST_DEVICE C operator()(C x) const { return C(1) / (C(1) + math::exp(-x)); }
};
struct TanhOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return math::tanh(x); } };
// x Phi(x), the exact (erf) form.
struct GeluOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return x * gelu_cdf(x); } };
// GELU's tanh approximation.
struct GeluTanhOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return gelu_tanh(x); } };
// The error function, 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x.
struct ErfOp { template <class C> MG_HOST_DEVICE C operator()(C x) const { return math::erf(x); } };
struct SignOp {
  template <class C> MG_HOST_DEVICE C operator()(C x) const { return static_cast<C>((C(0) < x) - (x < C(0))); }
};

// ---- binary ops ----

struct AddOp { template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a + b); } };
struct SubOp { template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a - b); } };
struct MulOp { template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a * b); } };
struct DivOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const {
    // Integer division by zero is undefined behaviour (x86 traps); here it gives 0.
    // Autograd never divides integers (true division promotes to float32).
    if constexpr (std::is_integral_v<C>) {
      return b == C(0) ? C(0) : static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
struct MaximumOp { template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a > b ? a : b; } };
struct MinimumOp { template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a < b ? a : b; } };
// relu(a + b): a residual block's end in one pass. NaN stays NaN, as relu.
struct AddReluOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const {
    return a + b < C(0) ? C(0) : static_cast<C>(a + b);
  }
};
// a ^ b; a tensor to a scalar power only (binary_scalar).
// NOTE: b = 0.5 and 2 take sqrt and a * a (correctly rounded, as the C library's pow is on
// the host), as PyTorch's kernels do: CUDA's double pow(9, 0.5) is 3 - 2^-51, which an
// int64 tensor then truncates to 2.
struct PowOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const {
    if (b == C(0.5)) return math::sqrt(a);
    if (b == C(2)) return a * a;
    return math::pow(a, b);
  }
};

// Gradients of unary ops, fused: a = the incoming gradient, b = what the forward saved.
// b = relu's output.
struct ReluBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return b > C(0) ? a : C(0); }
};
// b = sigmoid's output.
struct SigmoidBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a * b * (C(1) - b); }
};
// b = tanh's output.
struct TanhBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a * (C(1) - b * b); }
};
// b = gelu's input.
struct GeluBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a * (gelu_cdf(b) + b * gelu_pdf(b)); }
};
// b = the tanh-approximated gelu's input.
struct GeluTanhBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a * gelu_tanh_derivative(b); }
};

// b = erf's input: d/dx erf(x) = 2/sqrt(pi) exp(-x^2).
struct ErfBackwardOp {
  template <class C> MG_HOST_DEVICE C operator()(C a, C b) const { return a * C(kTwoOverSqrtPi) * math::exp(-b * b); }
};

// Comparisons: the output is bool. A device may run a > b as b < a (Mirror: the op with
// its operands swapped), which saves it a set of kernels.
struct EqualOp { template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a == b; } };
struct NotEqualOp { template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a != b; } };
struct LessOp { template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a < b; } };
struct LessEqualOp { template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a <= b; } };
struct GreaterOp {
  using Mirror = LessOp;
  template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a > b; }
};
struct GreaterEqualOp {
  using Mirror = LessEqualOp;
  template <class C> MG_HOST_DEVICE bool operator()(C a, C b) const { return a >= b; }
};

template <class Op>
inline constexpr bool kIsComparison = std::is_same_v<decltype(Op{}(1.0, 1.0)), bool>;

// ---- the lists ----

// Which dtypes an op is defined for: Floating (float32/64, float16, bfloat16) or Any
// (integers and bool too). Autograd sends an integer tensor only to the Any ops
// (exp, sigmoid, ... promote it to float32 first).
enum class OpDTypes : uint8_t { Floating, Any };
// Which kernels take a binary op: binary (two tensors) and binary_scalar (a tensor and a
// double), or one of them.
enum class OpForms : uint8_t { TensorAndScalar, TensorOnly, ScalarOnly };

// UnaryOp::name, its functor, its dtypes.
#define MG_UNARY_OPS(X)            \
  X(Neg, NegOp, Any)               \
  X(Exp, ExpOp, Floating)          \
  X(Log, LogOp, Floating)          \
  X(Sqrt, SqrtOp, Floating)        \
  X(Abs, AbsOp, Any)               \
  X(Relu, ReluOp, Any)             \
  X(Sigmoid, SigmoidOp, Floating)  \
  X(Tanh, TanhOp, Floating)        \
  X(Gelu, GeluOp, Floating)        \
  X(GeluTanh, GeluTanhOp, Floating) \
  X(Erf, ErfOp, Floating)          \
  X(Sign, SignOp, Any)

// BinaryOp::name, its functor, its dtypes, the kernels that take it.
#define MG_BINARY_OPS(X)                                         \
  X(Add, AddOp, Any, TensorAndScalar)                            \
  X(Sub, SubOp, Any, TensorAndScalar)                            \
  X(Mul, MulOp, Any, TensorAndScalar)                            \
  X(Div, DivOp, Any, TensorAndScalar)                            \
  X(Maximum, MaximumOp, Any, TensorAndScalar)                    \
  X(Minimum, MinimumOp, Any, TensorAndScalar)                    \
  X(AddRelu, AddReluOp, Any, TensorOnly)                         \
  X(Eq, EqualOp, Any, TensorAndScalar)                           \
  X(Ne, NotEqualOp, Any, TensorAndScalar)                        \
  X(Lt, LessOp, Any, TensorAndScalar)                            \
  X(Le, LessEqualOp, Any, TensorAndScalar)                       \
  X(Gt, GreaterOp, Any, TensorAndScalar)                         \
  X(Ge, GreaterEqualOp, Any, TensorAndScalar)                    \
  X(ReluBackward, ReluBackwardOp, Floating, TensorOnly)          \
  X(SigmoidBackward, SigmoidBackwardOp, Floating, TensorOnly)    \
  X(TanhBackward, TanhBackwardOp, Floating, TensorOnly)          \
  X(GeluBackward, GeluBackwardOp, Floating, TensorOnly)          \
  X(GeluTanhBackward, GeluTanhBackwardOp, Floating, TensorOnly)  \
  X(ErfBackward, ErfBackwardOp, Floating, TensorOnly)            \
  X(Pow, PowOp, Any, ScalarOnly)

constexpr bool takes_tensor(OpForms forms) { return forms != OpForms::ScalarOnly; }
constexpr bool takes_scalar(OpForms forms) { return forms != OpForms::TensorOnly; }

}  // namespace mg::elementwise
