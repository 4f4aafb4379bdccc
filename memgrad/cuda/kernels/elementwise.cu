// cuda/kernels/elementwise.cu — CUDA unary and binary elementwise kernels (with
// broadcasting), ops with a scalar, the fused gradients of activations, and dropout.
//
// The ops and their formulas are core/elementwise_ops.h's, the ones the CPU kernels apply;
// each (op, dtype) pair is its own kernel instantiation, so no kernel switches on the op
// per element. As on the CPU: 16-bit floats compute in float, integer tensors compute
// unary ops and ops with a scalar in double, bool computes binary ops in int.
// NOTE: to keep compile times reasonable, integer and bool tensors run the strided kernel
// only (no vectorised variant): they are rare in a training step.
#include "memgrad/core/random.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

using namespace elementwise;

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
constexpr bool defined_for(OpDTypes dtypes) {
  return dtypes == OpDTypes::Any || kFloating<T>;
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& input, const Tensor& output) {
  using C = std::conditional_t<kFloating<T>, device_compute_t<T>, double>;
  switch (op) {
#define MG_UNARY_CASE(name, functor, dtypes)                                             \
  case UnaryOp::name:                                                                    \
    if constexpr (defined_for<T>(OpDTypes::dtypes)) return run_unary<T, C, functor>(input, output); \
    break;
    MG_UNARY_OPS(MG_UNARY_CASE)
#undef MG_UNARY_CASE
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

// Op, or its Mirror with the operands swapped where it has one (a > b as b < a).
template <class T, class C, class Op>
void run_binary_op(const Tensor& a, const Tensor& b, const Tensor& output) {
  if constexpr (requires { typename Op::Mirror; }) {
    run_binary_op<T, C, typename Op::Mirror>(b, a, output);
  } else if constexpr (kIsComparison<Op>) {
    run_compare<T, C, Op>(a, b, output);
  } else {
    run_binary<T, C, Op>(a, b, output);
  }
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& output) {
  using C = std::conditional_t<std::is_same_v<T, bool>, int, device_compute_t<T>>;
  switch (op) {
#define MG_BINARY_CASE(name, functor, dtypes, forms)                              \
  case BinaryOp::name:                                                            \
    if constexpr (takes_tensor(OpForms::forms) && defined_for<T>(OpDTypes::dtypes)) { \
      return run_binary_op<T, C, functor>(a, b, output);                          \
    }                                                                             \
    break;
    MG_BINARY_OPS(MG_BINARY_CASE)
#undef MG_BINARY_CASE
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

// Op with the scalar, or its Mirror with the scalar first where it has one.
template <class T, class C, class Op>
void run_scalar_op(const Tensor& a, C scalar, const Tensor& output) {
  if constexpr (requires { typename Op::Mirror; }) {
    run_scalar<T, C, typename Op::Mirror, /*kScalarFirst=*/true>(a, scalar, output);
  } else {
    run_scalar<T, C, Op>(a, scalar, output);
  }
}

template <class T>
void binary_scalar_typed(BinaryOp op, const Tensor& a, double scalar, const Tensor& output) {
  // As the CPU: integer and bool tensors compute with the scalar in double.
  using C = std::conditional_t<kFloating<T>, device_compute_t<T>, double>;
  auto s = static_cast<C>(scalar);
  // NOTE: x - s is x + (-s) exactly in IEEE arithmetic (and -(C)s == (C)(-s)), which
  // saves a set of kernels.
  if (op == BinaryOp::Sub) return run_scalar<T, C, AddOp>(a, -s, output);
  switch (op) {
#define MG_BINARY_CASE(name, functor, dtypes, forms)                              \
  case BinaryOp::name:                                                            \
    if constexpr (takes_scalar(OpForms::forms) && defined_for<T>(OpDTypes::dtypes)) { \
      return run_scalar_op<T, C, functor>(a, s, output);                          \
    }                                                                             \
    break;
    MG_BINARY_OPS(MG_BINARY_CASE)
#undef MG_BINARY_CASE
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
