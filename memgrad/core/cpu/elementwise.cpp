// core/cpu/elementwise.cpp — CPU unary and binary elementwise kernels (with broadcasting),
// the fused gradients of activations, and dropout.
#include <cmath>
#include <numbers>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/random.h"

namespace mg::cpu {

namespace {

template <class C>
C gelu_cdf(C x) { return C(0.5) * (C(1) + std::erf(x * C(0.5 * std::numbers::sqrt2))); }
template <class C>
C gelu_pdf(C x) { return std::exp(C(-0.5) * x * x) * C(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2); }

// GELU's tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
constexpr double kGeluTanhScale = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
template <class C>
C gelu_tanh(C x) {
  C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
  return C(0.5) * x * (C(1) + std::tanh(inner));
}
// d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u).
template <class C>
C gelu_tanh_derivative(C x) {
  C t = std::tanh(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
  C inner_derivative = C(kGeluTanhScale) * (C(1) + C(3 * kGeluTanhCubic) * x * x);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * inner_derivative;
}

template <class C>
C apply_unary(UnaryOp op, C x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Abs: return x < C(0) ? -x : x;
    case UnaryOp::Relu: return x > C(0) ? x : C(0);
    case UnaryOp::Sigmoid: return C(1) / (C(1) + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Gelu: return x * gelu_cdf(x);
    case UnaryOp::GeluTanh: return gelu_tanh(x);
    case UnaryOp::Sign: return static_cast<C>((C(0) < x) - (x < C(0)));
  }
  return x;
}

template <class C>
C apply_binary(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return a > b ? a : b;
    case BinaryOp::Minimum: return a < b ? a : b;
    case BinaryOp::AddRelu: return a + b < C(0) ? C(0) : a + b;  // NaN stays NaN, as relu
    case BinaryOp::ReluBackward: return b > C(0) ? a : C(0);
    case BinaryOp::SigmoidBackward: return a * b * (C(1) - b);
    case BinaryOp::TanhBackward: return a * (C(1) - b * b);
    case BinaryOp::GeluBackward: return a * (gelu_cdf(b) + b * gelu_pdf(b));
    case BinaryOp::GeluTanhBackward: return a * gelu_tanh_derivative(b);
    case BinaryOp::Pow: return static_cast<C>(std::pow(a, b));
    default: break;
  }
  MG_ASSERT(false, "binary op ", static_cast<int>(op), " is not arithmetic");
}

template <class C>
bool apply_comparison(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    default: break;
  }
  MG_ASSERT(false, "binary op ", static_cast<int>(op), " is not a comparison");
}

// The per-element work of a binary op, chosen once per kernel call (not per element).
template <class T, class Op>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& output, Op op) {
  map2<T, T, T>(a, b, output, [op](T x, T y) {
    return static_cast<T>(op(static_cast<compute_t<T>>(x), static_cast<compute_t<T>>(y)));
  });
}

}  // namespace

void unary(UnaryOp op, const Tensor& input, const Tensor& output) {
  dispatch_dtype(input.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_integral_v<compute_t<T>>, double, compute_t<T>>;
#define MG_UNARY_CASE(name)                                                                   \
  case UnaryOp::name:                                                                         \
    map1<T, T>(input, output, [](T x) {                                                       \
      return static_cast<T>(apply_unary<C>(UnaryOp::name, static_cast<C>(x)));              \
    });                                                                                       \
    break;
    switch (op) {
      MG_UNARY_CASE(Neg) MG_UNARY_CASE(Exp) MG_UNARY_CASE(Log) MG_UNARY_CASE(Sqrt)
      MG_UNARY_CASE(Abs) MG_UNARY_CASE(Relu) MG_UNARY_CASE(Sigmoid) MG_UNARY_CASE(Tanh)
      MG_UNARY_CASE(Gelu) MG_UNARY_CASE(GeluTanh) MG_UNARY_CASE(Sign)
    }
#undef MG_UNARY_CASE
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output) {
  dispatch_dtype(a.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_same_v<T, bool>, int, compute_t<T>>;
    if (is_comparison(op)) {
      map2<T, T, bool>(a, b, output, [op](T x, T y) {
        return apply_comparison<C>(op, static_cast<C>(x), static_cast<C>(y));
      });
      return;
    }
    // NOTE: one instantiation per op, so the op's switch is resolved outside the loop and
    // each loop body vectorises.
#define MG_BINARY_CASE(name)                                                            \
  case BinaryOp::name:                                                                  \
    binary_typed<T>(a, b, output, [](C x, C y) { return apply_binary<C>(BinaryOp::name, x, y); }); \
    break;
    switch (op) {
      MG_BINARY_CASE(Add) MG_BINARY_CASE(Sub) MG_BINARY_CASE(Mul) MG_BINARY_CASE(Div)
      MG_BINARY_CASE(Maximum) MG_BINARY_CASE(Minimum) MG_BINARY_CASE(AddRelu) MG_BINARY_CASE(ReluBackward)
      MG_BINARY_CASE(SigmoidBackward) MG_BINARY_CASE(TanhBackward) MG_BINARY_CASE(GeluBackward)
      MG_BINARY_CASE(GeluTanhBackward)
      MG_BINARY_CASE(Pow)
      default: MG_ASSERT(false, "unhandled binary op");
    }
#undef MG_BINARY_CASE
  });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& output) {
  dispatch_dtype(a.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_integral_v<compute_t<T>>, double, compute_t<T>>;
    C s = static_cast<C>(scalar);
    if (is_comparison(op)) {
      map1<T, bool>(a, output, [op, s](T x) { return apply_comparison<C>(op, static_cast<C>(x), s); });
      return;
    }
    map1<T, T>(a, output, [op, s](T x) {
      return convert_value<T>(apply_binary<C>(op, static_cast<C>(x), s));
    });
  });
}

void dropout(const Tensor& input, double p, PhiloxState rng, const Tensor& mask, const Tensor& output) {
  MG_ASSERT(input.is_contiguous() && mask.is_contiguous() && output.is_contiguous(),
            "dropout expects contiguous tensors");
  dispatch_floating(input.dtype(), "dropout", [&]<class T>() {
    const T* in = input.data_ptr<T>();
    bool* keep = mask.data_ptr<bool>();
    T* out = output.data_ptr<T>();
    auto scale = static_cast<compute_t<T>>(1.0 / (1.0 - p));
    auto drop_probability = static_cast<float>(p);
    int64_t count = input.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
      keep[i] = uniform_from_bits(philox_block(rng, static_cast<uint64_t>(i))[0]) >= drop_probability;
      out[i] = keep[i] ? static_cast<T>(static_cast<compute_t<T>>(in[i]) * scale) : T(0);
    }
  });
}

void masked_scale(const Tensor& grad, const Tensor& mask, double scale, const Tensor& output) {
  dispatch_floating(grad.dtype(), "dropout backward", [&]<class T>() {
    auto typed_scale = static_cast<compute_t<T>>(scale);
    map2<T, bool, T>(grad, mask, output, [typed_scale](T g, bool keep) {
      return keep ? static_cast<T>(static_cast<compute_t<T>>(g) * typed_scale) : T(0);
    });
  });
}

}  // namespace mg::cpu
