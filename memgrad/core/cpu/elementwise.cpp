// core/cpu/elementwise.cpp — CPU unary and binary elementwise kernels (with broadcasting),
// the fused gradients of activations, and dropout. The ops and their formulas are
// core/elementwise_ops.h's.
#include <type_traits>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/random.h"

namespace mg::cpu {

namespace {

using namespace elementwise;

template <class T>
constexpr bool defined_for(OpDTypes dtypes) {
  return dtypes == OpDTypes::Any || std::is_floating_point_v<compute_t<T>>;
}

[[noreturn]] void unsupported(const char* kernel, const char* op, DType dtype) {
  MG_CHECK(false, kernel, ": ", op, " is not defined for ", dtype_name(dtype),
           " tensors. Hint: convert with .to(mg::DType::Float32) first.");
}

// x op scalar, the scalar already in the compute type C.
template <class T, class C, class Op>
void scalar_typed(const Tensor& a, C scalar, const Tensor& output) {
  if constexpr (kIsComparison<Op>) {
    map1<T, bool>(a, output, [scalar](T x) { return Op{}(static_cast<C>(x), scalar); });
  } else {
    map1<T, T>(a, output, [scalar](T x) { return convert_value<T>(Op{}(static_cast<C>(x), scalar)); });
  }
}

}  // namespace

// NOTE: one instantiation per (op, dtype), so the op is chosen outside the loop and each
// loop body vectorises. Integer tensors compute unary ops and ops with a scalar in double,
// bool computes binary ops in int.
void unary(UnaryOp op, const Tensor& input, const Tensor& output) {
  dispatch_dtype(input.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_integral_v<compute_t<T>>, double, compute_t<T>>;
    switch (op) {
#define MG_UNARY_CASE(name, functor, dtypes)                                                       \
  case UnaryOp::name:                                                                              \
    if constexpr (defined_for<T>(OpDTypes::dtypes)) {                                              \
      return map1<T, T>(input, output, [](T x) { return static_cast<T>(functor{}(static_cast<C>(x))); }); \
    }                                                                                              \
    unsupported("unary", #name, input.dtype());
      MG_UNARY_OPS(MG_UNARY_CASE)
#undef MG_UNARY_CASE
    }
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output) {
  dispatch_dtype(a.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_same_v<T, bool>, int, compute_t<T>>;
    switch (op) {
#define MG_BINARY_CASE(name, functor, dtypes, forms)                                              \
  case BinaryOp::name:                                                                            \
    if constexpr (takes_tensor(OpForms::forms) && defined_for<T>(OpDTypes::dtypes)) {             \
      if constexpr (kIsComparison<functor>) {                                                     \
        return map2<T, T, bool>(a, b, output,                                                     \
                                [](T x, T y) { return functor{}(static_cast<C>(x), static_cast<C>(y)); }); \
      } else {                                                                                    \
        return map2<T, T, T>(a, b, output, [](T x, T y) {                                         \
          return static_cast<T>(functor{}(static_cast<C>(x), static_cast<C>(y)));                 \
        });                                                                                       \
      }                                                                                           \
    }                                                                                             \
    unsupported("binary", #name, a.dtype());
      MG_BINARY_OPS(MG_BINARY_CASE)
#undef MG_BINARY_CASE
    }
  });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& output) {
  dispatch_dtype(a.dtype(), [&]<class T>() {
    using C = std::conditional_t<std::is_integral_v<compute_t<T>>, double, compute_t<T>>;
    auto s = static_cast<C>(scalar);
    switch (op) {
#define MG_BINARY_CASE(name, functor, dtypes, forms)                                   \
  case BinaryOp::name:                                                                 \
    if constexpr (takes_scalar(OpForms::forms) && defined_for<T>(OpDTypes::dtypes)) {  \
      return scalar_typed<T, C, functor>(a, s, output);                                \
    }                                                                                  \
    unsupported("binary_scalar", #name, a.dtype());
      MG_BINARY_OPS(MG_BINARY_CASE)
#undef MG_BINARY_CASE
    }
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
