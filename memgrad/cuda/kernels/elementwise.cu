// cuda/kernels/elementwise.cu — CUDA unary and binary elementwise kernels (with
// broadcasting), ops with a scalar, the fused gradients of activations, and dropout.
//
// Each op is a functor on the compute type, and each (op, dtype) pair is its own kernel
// instantiation, so no kernel switches on the op per element. The computation follows
// core/cpu/elementwise.cpp term by term: 16-bit floats compute in float, integer tensors
// compute unary ops and ops with a scalar in double, bool computes binary ops in int.
// The functors are __host__ __device__, so their arithmetic can also be run on the host
// next to the CPU kernels (which is how their term-by-term parity was checked).
// NOTE: to keep compile times reasonable, integer and bool tensors get only the ops that
// autograd can send them (no transcendental functions, no fused gradients) and run the
// strided kernel only (no vectorised variant): they are rare in a training step.
#include <cmath>
#include <numbers>

#include "memgrad/core/random.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

// ---- math on float and double (the float overloads call the single-precision functions) ----

__host__ __device__ __forceinline__ float device_exp(float x) { return expf(x); }
__host__ __device__ __forceinline__ double device_exp(double x) { return exp(x); }
__host__ __device__ __forceinline__ float device_log(float x) { return logf(x); }
__host__ __device__ __forceinline__ double device_log(double x) { return log(x); }
__host__ __device__ __forceinline__ float device_sqrt(float x) { return sqrtf(x); }
__host__ __device__ __forceinline__ double device_sqrt(double x) { return sqrt(x); }
__host__ __device__ __forceinline__ float device_tanh(float x) { return tanhf(x); }
__host__ __device__ __forceinline__ double device_tanh(double x) { return tanh(x); }
__host__ __device__ __forceinline__ float device_erf(float x) { return erff(x); }
__host__ __device__ __forceinline__ double device_erf(double x) { return erf(x); }
__host__ __device__ __forceinline__ float device_pow(float x, float y) { return powf(x, y); }
__host__ __device__ __forceinline__ double device_pow(double x, double y) { return pow(x, y); }

// Constants exactly as core/cpu/elementwise.cpp writes them (computed in double).
constexpr double kGeluErfScale = 0.5 * std::numbers::sqrt2;                             // 1/sqrt(2)
constexpr double kGeluPdfScale = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;  // 1/sqrt(2 pi)

template <class C>
__host__ __device__ __forceinline__ C gelu_cdf(C x) {
  return C(0.5) * (C(1) + device_erf(x * C(kGeluErfScale)));
}
template <class C>
__host__ __device__ __forceinline__ C gelu_pdf(C x) {
  return device_exp(C(-0.5) * x * x) * C(kGeluPdfScale);
}

// GELU's tanh approximation and its derivative, as core/cpu/elementwise.cpp writes them.
constexpr double kGeluTanhScale = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
template <class C>
__host__ __device__ __forceinline__ C gelu_tanh(C x) {
  C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
  return C(0.5) * x * (C(1) + device_tanh(inner));
}
template <class C>
__host__ __device__ __forceinline__ C gelu_tanh_derivative(C x) {
  C t = device_tanh(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
  C inner_derivative = C(kGeluTanhScale) * (C(1) + C(3 * kGeluTanhCubic) * x * x);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * inner_derivative;
}

// ---- unary ops on the compute type ----

struct NegOp { template <class C> __host__ __device__ C operator()(C x) const { return -x; } };
struct ExpOp { template <class C> __host__ __device__ C operator()(C x) const { return device_exp(x); } };
struct LogOp { template <class C> __host__ __device__ C operator()(C x) const { return device_log(x); } };
struct SqrtOp { template <class C> __host__ __device__ C operator()(C x) const { return device_sqrt(x); } };
struct AbsOp { template <class C> __host__ __device__ C operator()(C x) const { return x < C(0) ? -x : x; } };
struct ReluOp { template <class C> __host__ __device__ C operator()(C x) const { return x > C(0) ? x : C(0); } };
struct SigmoidOp {
  template <class C> __host__ __device__ C operator()(C x) const { return C(1) / (C(1) + device_exp(-x)); }
};
struct TanhOp { template <class C> __host__ __device__ C operator()(C x) const { return device_tanh(x); } };
struct GeluOp { template <class C> __host__ __device__ C operator()(C x) const { return x * gelu_cdf(x); } };
struct GeluTanhOp { template <class C> __host__ __device__ C operator()(C x) const { return gelu_tanh(x); } };
struct SignOp {
  template <class C> __host__ __device__ C operator()(C x) const { return static_cast<C>((C(0) < x) - (x < C(0))); }
};

// ---- binary ops on the compute type ----

struct AddOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return static_cast<C>(a + b); } };
struct SubOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return static_cast<C>(a - b); } };
struct MulOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return static_cast<C>(a * b); } };
struct DivOp {
  template <class C> __host__ __device__ C operator()(C a, C b) const {
    // Integer division by zero is undefined (the CPU traps); here it gives 0. Autograd
    // never divides integers (true division promotes to float32).
    if constexpr (std::is_integral_v<C>) {
      return b == C(0) ? C(0) : static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
struct MaximumOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return a > b ? a : b; } };
struct MinimumOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return a < b ? a : b; } };
// NaN stays NaN, as relu.
struct AddReluOp {
  template <class C> __host__ __device__ C operator()(C a, C b) const { return a + b < C(0) ? C(0) : a + b; }
};
struct PowOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return device_pow(a, b); } };
// Fused gradients: a = the incoming gradient, b = the saved tensor.
struct ReluBackwardOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return b > C(0) ? a : C(0); } };
struct SigmoidBackwardOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return a * b * (C(1) - b); } };
struct TanhBackwardOp { template <class C> __host__ __device__ C operator()(C a, C b) const { return a * (C(1) - b * b); } };
struct GeluBackwardOp {
  template <class C> __host__ __device__ C operator()(C a, C b) const { return a * (gelu_cdf(b) + b * gelu_pdf(b)); }
};
struct GeluTanhBackwardOp {
  template <class C> __host__ __device__ C operator()(C a, C b) const { return a * gelu_tanh_derivative(b); }
};

// Comparisons; a > b and a >= b run as b < a and b <= a with the operands swapped.
struct EqualOp { template <class C> __host__ __device__ bool operator()(C a, C b) const { return a == b; } };
struct NotEqualOp { template <class C> __host__ __device__ bool operator()(C a, C b) const { return a != b; } };
struct LessOp { template <class C> __host__ __device__ bool operator()(C a, C b) const { return a < b; } };
struct LessEqualOp { template <class C> __host__ __device__ bool operator()(C a, C b) const { return a <= b; } };

// ---- element functors: load as T, compute in C, store as T (or bool) ----

template <class T, class C, class Op>
struct UnaryElement {
  __host__ __device__ T operator()(T x) const { return from_compute<T>(Op{}(to_compute<C>(x))); }
};

template <class T, class C, class Op>
struct BinaryElement {
  __host__ __device__ T operator()(T a, T b) const { return from_compute<T>(Op{}(to_compute<C>(a), to_compute<C>(b))); }
};

template <class T, class C, class Op>
struct CompareElement {
  __host__ __device__ bool operator()(T a, T b) const { return Op{}(to_compute<C>(a), to_compute<C>(b)); }
};

template <class Op>
inline constexpr bool kIsComparison = std::is_same_v<Op, EqualOp> || std::is_same_v<Op, NotEqualOp> ||
                                      std::is_same_v<Op, LessOp> || std::is_same_v<Op, LessEqualOp>;

// x op scalar (or scalar op x when kScalarFirst), the scalar already in the compute type;
// comparisons give bool.
template <class T, class C, class Op, bool kScalarFirst = false>
struct ScalarElement {
  using Out = std::conditional_t<kIsComparison<Op>, bool, T>;
  C scalar;
  __host__ __device__ Out operator()(T x) const {
    C value = to_compute<C>(x);
    if constexpr (kIsComparison<Op>) {
      return kScalarFirst ? Op{}(scalar, value) : Op{}(value, scalar);
    } else {
      return from_compute<T>(kScalarFirst ? Op{}(scalar, value) : Op{}(value, scalar));
    }
  }
};

template <class T>
inline constexpr bool kFloating = is_device_floating_v<T>;

[[noreturn]] void unsupported(const char* kernel, DType dtype) {
  mg::detail::throw_error(mg::detail::str_cat(kernel, ": this op is not supported for ", dtype_name(dtype),
                                              " tensors on CUDA. Hint: convert with .to(mg::DType::Float32) first."));
}

// ---- unary ----

template <class T, class C, class Op>
void run_unary(const Tensor& input, const Tensor& output) {
  map1<T, T, kFloating<T>>(input, output, UnaryElement<T, C, Op>{});
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& input, const Tensor& output) {
  if constexpr (kFloating<T>) {
    using C = device_compute_t<T>;
    switch (op) {
      case UnaryOp::Neg: return run_unary<T, C, NegOp>(input, output);
      case UnaryOp::Exp: return run_unary<T, C, ExpOp>(input, output);
      case UnaryOp::Log: return run_unary<T, C, LogOp>(input, output);
      case UnaryOp::Sqrt: return run_unary<T, C, SqrtOp>(input, output);
      case UnaryOp::Abs: return run_unary<T, C, AbsOp>(input, output);
      case UnaryOp::Relu: return run_unary<T, C, ReluOp>(input, output);
      case UnaryOp::Sigmoid: return run_unary<T, C, SigmoidOp>(input, output);
      case UnaryOp::Tanh: return run_unary<T, C, TanhOp>(input, output);
      case UnaryOp::Gelu: return run_unary<T, C, GeluOp>(input, output);
      case UnaryOp::GeluTanh: return run_unary<T, C, GeluTanhOp>(input, output);
      case UnaryOp::Sign: return run_unary<T, C, SignOp>(input, output);
    }
  } else {
    using C = double;  // as the CPU: integer unary ops compute in double
    switch (op) {
      case UnaryOp::Neg: return run_unary<T, C, NegOp>(input, output);
      case UnaryOp::Abs: return run_unary<T, C, AbsOp>(input, output);
      case UnaryOp::Relu: return run_unary<T, C, ReluOp>(input, output);
      case UnaryOp::Sign: return run_unary<T, C, SignOp>(input, output);
      default: break;
    }
  }
  unsupported("unary", input.dtype());
}

// ---- binary ----

template <class T, class C, class Op>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& output) {
  map2<T, T, T, kFloating<T>>(a, b, output, BinaryElement<T, C, Op>{});
}

template <class T, class C, class Op>
void run_compare(const Tensor& a, const Tensor& b, const Tensor& output) {
  map2<bool, T, T, kFloating<T>>(a, b, output, CompareElement<T, C, Op>{});
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output) {
  using C = std::conditional_t<std::is_same_v<T, bool>, int, device_compute_t<T>>;
  switch (op) {
    case BinaryOp::Add: return run_binary<T, C, AddOp>(a, b, output);
    case BinaryOp::Sub: return run_binary<T, C, SubOp>(a, b, output);
    case BinaryOp::Mul: return run_binary<T, C, MulOp>(a, b, output);
    case BinaryOp::Div: return run_binary<T, C, DivOp>(a, b, output);
    case BinaryOp::Maximum: return run_binary<T, C, MaximumOp>(a, b, output);
    case BinaryOp::Minimum: return run_binary<T, C, MinimumOp>(a, b, output);
    case BinaryOp::AddRelu: return run_binary<T, C, AddReluOp>(a, b, output);
    case BinaryOp::Eq: return run_compare<T, C, EqualOp>(a, b, output);
    case BinaryOp::Ne: return run_compare<T, C, NotEqualOp>(a, b, output);
    case BinaryOp::Lt: return run_compare<T, C, LessOp>(a, b, output);
    case BinaryOp::Le: return run_compare<T, C, LessEqualOp>(a, b, output);
    case BinaryOp::Gt: return run_compare<T, C, LessOp>(b, a, output);
    case BinaryOp::Ge: return run_compare<T, C, LessEqualOp>(b, a, output);
    default: break;
  }
  if constexpr (kFloating<T>) {
    switch (op) {
      case BinaryOp::ReluBackward: return run_binary<T, C, ReluBackwardOp>(a, b, output);
      case BinaryOp::SigmoidBackward: return run_binary<T, C, SigmoidBackwardOp>(a, b, output);
      case BinaryOp::TanhBackward: return run_binary<T, C, TanhBackwardOp>(a, b, output);
      case BinaryOp::GeluBackward: return run_binary<T, C, GeluBackwardOp>(a, b, output);
      case BinaryOp::GeluTanhBackward: return run_binary<T, C, GeluTanhBackwardOp>(a, b, output);
      default: break;
    }
  }
  MG_CHECK(op != BinaryOp::Pow, "binary: Pow takes a scalar exponent (binary_scalar), not a tensor");
  unsupported("binary", a.dtype());
}

// ---- binary with a scalar ----

template <class T, class C, class Op, bool kScalarFirst = false>
void run_scalar(const Tensor& a, C scalar, const Tensor& output) {
  using Element = ScalarElement<T, C, Op, kScalarFirst>;
  map1<typename Element::Out, T, kFloating<T>>(a, output, Element{scalar});
}

template <class T>
void binary_scalar_typed(BinaryOp op, const Tensor& a, double scalar, const Tensor& output) {
  // As the CPU: integer and bool tensors compute with the scalar in double.
  using C = std::conditional_t<kFloating<T>, device_compute_t<T>, double>;
  auto s = static_cast<C>(scalar);
  switch (op) {
    case BinaryOp::Add: return run_scalar<T, C, AddOp>(a, s, output);
    // NOTE: x - s is x + (-s) exactly in IEEE arithmetic (and -(C)s == (C)(-s)), which
    // saves a set of kernels.
    case BinaryOp::Sub: return run_scalar<T, C, AddOp>(a, -s, output);
    case BinaryOp::Mul: return run_scalar<T, C, MulOp>(a, s, output);
    case BinaryOp::Div: return run_scalar<T, C, DivOp>(a, s, output);
    case BinaryOp::Maximum: return run_scalar<T, C, MaximumOp>(a, s, output);
    case BinaryOp::Minimum: return run_scalar<T, C, MinimumOp>(a, s, output);
    case BinaryOp::Pow: return run_scalar<T, C, PowOp>(a, s, output);
    case BinaryOp::Eq: return run_scalar<T, C, EqualOp>(a, s, output);
    case BinaryOp::Ne: return run_scalar<T, C, NotEqualOp>(a, s, output);
    case BinaryOp::Lt: return run_scalar<T, C, LessOp>(a, s, output);
    case BinaryOp::Le: return run_scalar<T, C, LessEqualOp>(a, s, output);
    case BinaryOp::Gt: return run_scalar<T, C, LessOp, /*kScalarFirst=*/true>(a, s, output);
    case BinaryOp::Ge: return run_scalar<T, C, LessEqualOp, /*kScalarFirst=*/true>(a, s, output);
    default: break;
  }
  unsupported("binary_scalar", a.dtype());
}

// ---- dropout ----

// keep[i] = uniform(block offset + i) >= p; out[i] = keep ? in[i] * scale : 0 — the CPU's
// mapping of Philox blocks to elements, so the same (seed, offset) gives the same mask.
template <class T, class C>
__global__ void __launch_bounds__(kThreadsPerBlock)
    dropout_kernel(const T* in, bool* keep, T* out, int64_t count, PhiloxState rng, float drop_probability,
                   C scale) {
  for (int64_t i = global_thread_index(); i < count; i += grid_stride()) {
    bool kept = uniform_from_bits(philox_block(rng, static_cast<uint64_t>(i))[0]) >= drop_probability;
    keep[i] = kept;
    out[i] = kept ? from_compute<T>(to_compute<C>(in[i]) * scale) : from_compute<T>(C(0));
  }
}

template <class T, class C>
struct MaskedScaleElement {
  C scale;
  __host__ __device__ T operator()(T grad, bool keep) const {
    return keep ? from_compute<T>(to_compute<C>(grad) * scale) : from_compute<T>(C(0));
  }
};

}  // namespace

void unary(UnaryOp op, const Tensor& input, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  dispatch_dtype(input.dtype(), [&]<class T>() { unary_typed<device_t<T>>(op, input, output); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  dispatch_dtype(a.dtype(), [&]<class T>() { binary_typed<device_t<T>>(op, a, b, output); });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  dispatch_dtype(a.dtype(), [&]<class T>() { binary_scalar_typed<device_t<T>>(op, a, scalar, output); });
}

void dropout(const Tensor& input, double p, PhiloxState rng, const Tensor& mask, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  MG_ASSERT(input.is_contiguous() && mask.is_contiguous() && output.is_contiguous(),
            "dropout expects contiguous tensors");
  int64_t count = input.numel();
  if (count == 0) return;
  dispatch_floating(input.dtype(), "dropout", [&]<class HostT>() {
    using T = device_t<HostT>;
    using C = device_compute_t<T>;
    auto scale = static_cast<C>(1.0 / (1.0 - p));
    LaunchConfig config = launch_config(count);
    dropout_kernel<T, C><<<config.blocks, config.threads, 0, current_stream(input.device())>>>(
        device_data<HostT>(input), device_data<bool>(mask), device_data<HostT>(output), count, rng,
        static_cast<float>(p), scale);
    MG_CUDA_CHECK_LAUNCH();
  });
}

void masked_scale(const Tensor& grad, const Tensor& mask, double scale, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  dispatch_floating(grad.dtype(), "dropout backward", [&]<class HostT>() {
    using T = device_t<HostT>;
    using C = device_compute_t<T>;
    map2<T, T, bool>(grad, mask, output, MaskedScaleElement<T, C>{static_cast<C>(scale)});
  });
}

}  // namespace mg::cuda
