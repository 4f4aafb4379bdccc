// tests/ops/every_op.h — one loop over every op on a device, in every dtype, against the
// CPU in float64 (as ggml's test-backend-ops). tests/ops/test_every_op.cpp runs it on the
// CPU, tests/cuda/test_cuda_every_op.cpp on CUDA.
//
// - Elementwise ops come from core/elementwise_ops.h's lists: every UnaryOp and BinaryOp
//   (both forms, as the list allows) in each dtype its list entry allows, through the
//   device's kernel table, over shapes with broadcasting, transposed, strided and offset
//   views and odd sizes. A new list entry is covered without a line here.
// - Reductions, softmax, norms, losses and the other ops run through the public API,
//   forward and backward, from kOpCases below: one entry per op configuration.
//
// The reference runs on the CPU in float64 from the tested values (rounded to the tested
// dtype first) and is rounded to the result's dtype before the comparison, so that only
// the op's own arithmetic is measured: an overflow to inf in float16 is one on both sides.
// Integer dtypes compare exactly with the CPU in the same dtype (integer division and
// truncation are not float64's arithmetic).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/memgrad.h"

namespace every_op {

using namespace mg;

inline constexpr DType kFloatingTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
inline constexpr DType kIntegerTypes[] = {DType::Int64, DType::Int32};

// How far a result may be from the reference (itself rounded to the result's dtype),
// relative to max(|reference|, 1) for elementwise ops, and to max(largest |reference| of
// the tensor, 1) for the others (sums over many terms): a few units in the last place of
// the dtype's compute (float32 for the 16-bit types, where the result's rounding can go the
// other way: one unit in its last place); exact for integers and bools.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 4e-6;
    case DType::Float16: return 2e-3;    // one ulp: 2^-10
    case DType::BFloat16: return 1.6e-2;  // 2^-7
    default: return 0.0;
  }
}

enum class Values {
  Signed,        // standard normal (integers: trunc(5 n))
  Positive,      // 0.25 + |n| (integers: 1 + trunc(3 |n|)): for log, sqrt, fractional powers
  AwayFromZero,  // sign(n) (0.25 + |n|) (integers: never 0): divisors
};
enum class Layout { Contiguous, Transposed, Strided, Offset };

inline const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Offset: return "offset";
  }
  return "?";
}

// Random values of `dtype` on the CPU, drawn in float64 from `seed`.
inline Tensor random_values(const Shape& sizes, DType dtype, uint64_t seed, Values kind) {
  Generator generator(seed);
  std::vector<double> values =
      randn(Shape{std::max<int64_t>(sizes.numel(), 1)}, {.dtype = DType::Float64}, &generator).to_vector<double>();
  bool integral = !is_floating(dtype);
  for (double& v : values) {
    double sign = v < 0 ? -1.0 : 1.0;
    switch (kind) {
      case Values::Signed: v = integral ? std::trunc(5 * v) : v; break;
      case Values::Positive: v = integral ? 1 + std::trunc(3 * std::abs(v)) : 0.25 + std::abs(v); break;
      case Values::AwayFromZero:
        v = sign * (integral ? 1 + std::trunc(3 * std::abs(v)) : 0.25 + std::abs(v));
        break;
    }
  }
  values.resize(sizes.numel());
  Tensor flat = from_vector(values, Shape{sizes.numel()});
  return converted_copy(reshape(flat, sizes), dtype, Device::cpu());
}

// The base buffer a view of `sizes` in `layout` is cut from, and the view.
inline Shape base_sizes(const Shape& sizes, Layout layout) {
  Shape base = sizes;
  int last = static_cast<int>(sizes.size()) - 1;
  switch (layout) {
    case Layout::Contiguous: break;
    case Layout::Transposed: std::swap(base[last - 1], base[last]); break;
    case Layout::Strided: base[last] = 2 * sizes[last] + 1; break;
    case Layout::Offset: base = {sizes.numel() + 1}; break;
  }
  return base;
}
inline Tensor view_of(const Tensor& base, const Shape& sizes, Layout layout) {
  int last = static_cast<int>(sizes.size()) - 1;
  switch (layout) {
    case Layout::Contiguous: return base;
    case Layout::Transposed: return transpose(base, last - 1, last);
    case Layout::Strided: return slice(base, last, 1, base.size(last), 2);
    case Layout::Offset: return reshape(narrow(base, 0, 1, sizes.numel()), sizes);
  }
  return base;
}

// A layout `sizes` can take (transposing needs two dims, striding one).
inline bool fits(const Shape& sizes, Layout layout) {
  return layout == Layout::Contiguous || layout == Layout::Offset ||
         (layout == Layout::Strided && !sizes.empty()) || (layout == Layout::Transposed && sizes.size() >= 2);
}

// The dtype the reference computes in: float64, or the tested integer dtype.
inline DType reference_dtype(DType dtype) { return is_floating(dtype) ? DType::Float64 : dtype; }

// An operand on the tested device and its reference twin on the CPU: the same values (the
// reference's converted from the tested ones) in the same layout, each a view of a whole
// random buffer, so that a kernel writing outside its view is caught when the buffers are
// compared.
struct Twin {
  Tensor tested, reference;            // the views
  Tensor tested_base, reference_base;  // their buffers
};

inline Twin make_twin(const Shape& sizes, Layout layout, DType dtype, Device device, uint64_t seed, Values kind) {
  Twin twin;
  Tensor base = random_values(base_sizes(sizes, layout), dtype, seed, kind);
  twin.tested_base = base.to(device);
  twin.reference_base = converted_copy(base, reference_dtype(dtype), Device::cpu());
  twin.tested = view_of(twin.tested_base, sizes, layout);
  twin.reference = view_of(twin.reference_base, sizes, layout);
  return twin;
}

inline std::vector<double> host_values(const Tensor& tensor) {
  return converted_copy(tensor.to(Device::cpu()), DType::Float64, Device::cpu()).to_vector<double>();
}

// `tested` against `reference` rounded to tested's dtype: every element within
// tolerance(compute_dtype) times max(|reference|, 1) (per_element) or times max(largest
// |reference|, 1); NaN matches NaN, inf the same inf.
inline void check_matches(const Tensor& tested, const Tensor& reference, DType compute_dtype, bool per_element,
                          double slack, const std::string& what) {
  INFO(what);
  REQUIRE(tested.sizes() == reference.sizes());
  std::vector<double> got = host_values(tested);
  std::vector<double> expected = host_values(converted_copy(reference, tested.dtype(), Device::cpu()));
  double rtol = is_floating(tested.dtype()) ? tolerance(compute_dtype) * slack : 0.0;
  double scale = 1.0;
  if (!per_element) {
    for (double v : expected) scale = std::isfinite(v) ? std::max(scale, std::abs(v)) : scale;
  }
  int64_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double bound = rtol * (per_element ? std::max(std::abs(expected[i]), 1.0) : scale);
    bool same = got[i] == expected[i] || (std::isnan(got[i]) && std::isnan(expected[i])) ||
                std::abs(got[i] - expected[i]) <= bound;
    if (!same && mismatches++ == 0) first = i;
  }
  std::ostringstream detail;
  if (mismatches > 0) {
    detail.precision(17);
    detail << mismatches << " of " << got.size() << " elements differ; first at " << first << ": "
           << tested.device() << " " << got[first] << " vs reference " << expected[first];
  }
  INFO(detail.str());
  CHECK(mismatches == 0);
}

// ---- elementwise ops, from core/elementwise_ops.h's lists ----

struct NamedUnary {
  UnaryOp op;
  const char* name;
  elementwise::OpDTypes dtypes;
};
struct NamedBinary {
  BinaryOp op;
  const char* name;
  elementwise::OpDTypes dtypes;
  elementwise::OpForms forms;
};
inline const NamedUnary kUnaryOps[] = {
#define MG_UNARY_ENTRY(name, functor, dtypes) {UnaryOp::name, #name, elementwise::OpDTypes::dtypes},
    MG_UNARY_OPS(MG_UNARY_ENTRY)
#undef MG_UNARY_ENTRY
};
inline const NamedBinary kBinaryOps[] = {
#define MG_BINARY_ENTRY(name, functor, dtypes, forms) \
  {BinaryOp::name, #name, elementwise::OpDTypes::dtypes, elementwise::OpForms::forms},
    MG_BINARY_OPS(MG_BINARY_ENTRY)
#undef MG_BINARY_ENTRY
};

// The dtypes an op of the list runs in: every floating one, and the integer ones for
// the ops defined on integers.
inline std::vector<DType> dtypes_of(elementwise::OpDTypes dtypes) {
  std::vector<DType> result(std::begin(kFloatingTypes), std::end(kFloatingTypes));
  if (dtypes == elementwise::OpDTypes::Any) {
    result.insert(result.end(), std::begin(kIntegerTypes), std::end(kIntegerTypes));
  }
  return result;
}

struct ElementwiseShape {
  Shape a, b;  // b unused by unary ops and ops with a scalar
  Layout a_layout, b_layout, out_layout;
};
// Odd sizes, broadcasting both ways, a 0-d operand, every view kind on inputs and output.
inline const ElementwiseShape kElementwiseShapes[] = {
    {{7, 13}, {7, 13}, Layout::Contiguous, Layout::Contiguous, Layout::Contiguous},
    {{3, 1, 5}, {1, 4, 5}, Layout::Contiguous, Layout::Contiguous, Layout::Contiguous},
    {{2, 3, 9}, {9}, Layout::Offset, Layout::Contiguous, Layout::Strided},
    {{17, 33}, {17, 33}, Layout::Transposed, Layout::Strided, Layout::Contiguous},
    {{17, 33}, {17, 33}, Layout::Strided, Layout::Transposed, Layout::Transposed},
    {{}, {5, 6}, Layout::Contiguous, Layout::Contiguous, Layout::Offset},
    {{1}, {}, Layout::Contiguous, Layout::Contiguous, Layout::Contiguous},
    {{1031}, {1031}, Layout::Offset, Layout::Offset, Layout::Offset},  // past a vector width, misaligned
};

// The whole output buffers: the view's values and that nothing around it changed.
inline void compare_outputs(const Twin& out, DType dtype, const std::string& what) {
  check_matches(out.tested_base, out.reference_base, dtype, /*per_element=*/true, 1.0, what);
}

inline std::string describe(const char* kernel, const char* op, DType dtype, const ElementwiseShape& shape,
                            bool with_b) {
  std::string text = std::string(kernel) + " " + op + " " + dtype_name(dtype) + " " + shape.a.str() + " " +
                     layout_name(shape.a_layout);
  if (with_b) text += std::string(" with ") + shape.b.str() + " " + layout_name(shape.b_layout);
  return text + " -> " + layout_name(shape.out_layout);
}

// Every unary op, dtype, shape and kind of values; returns how many cases ran.
inline int64_t check_unary_ops(Device device) {
  int64_t cases = 0;
  uint64_t seed = 1;
  for (const NamedUnary& unary : kUnaryOps) {
    for (DType dtype : dtypes_of(unary.dtypes)) {
      if (device.is_cpu() && !is_floating(dtype)) continue;  // the CPU is the integer reference
      for (const ElementwiseShape& shape : kElementwiseShapes) {
        if (!fits(shape.a, shape.a_layout) || !fits(shape.a, shape.out_layout)) continue;
        for (Values kind : {Values::Signed, Values::Positive}) {
          Twin in = make_twin(shape.a, shape.a_layout, dtype, device, seed++, kind);
          Twin out = make_twin(shape.a, shape.out_layout, dtype, device, seed++, Values::Signed);
          kernels(device).unary(unary.op, in.tested, out.tested);
          kernels(Device::cpu()).unary(unary.op, in.reference, out.reference);
          compare_outputs(out, dtype, describe("unary", unary.name, dtype, shape, false));
          ++cases;
        }
      }
    }
  }
  return cases;
}

// Every binary op in both forms its list entry allows; returns how many cases ran.
inline int64_t check_binary_ops(Device device) {
  int64_t cases = 0;
  uint64_t seed = 100000;
  for (const NamedBinary& binary : kBinaryOps) {
    // Divisors away from zero: a float16 quotient of a tiny divisor is inf on one side
    // only when the rounding differs, and integers divide by zero to 0 but trap in C++.
    Values b_kind = binary.op == BinaryOp::Div ? Values::AwayFromZero : Values::Signed;
    for (DType dtype : dtypes_of(binary.dtypes)) {
      if (device.is_cpu() && !is_floating(dtype)) continue;
      DType out_dtype = is_comparison(binary.op) ? DType::Bool : dtype;
      for (const ElementwiseShape& shape : kElementwiseShapes) {
        Shape out_sizes = broadcast_shapes(shape.a, shape.b);
        if (!fits(shape.a, shape.a_layout) || !fits(out_sizes, shape.out_layout)) continue;
        if (elementwise::takes_tensor(binary.forms) && fits(shape.b, shape.b_layout)) {
          Twin a = make_twin(shape.a, shape.a_layout, dtype, device, seed++, Values::Signed);
          Twin b = make_twin(shape.b, shape.b_layout, dtype, device, seed++, b_kind);
          Twin out = make_twin(out_sizes, shape.out_layout, out_dtype, device, seed++, Values::Signed);
          kernels(device).binary(binary.op, a.tested, b.tested, out.tested);
          kernels(Device::cpu()).binary(binary.op, a.reference, b.reference, out.reference);
          compare_outputs(out, dtype, describe("binary", binary.name, dtype, shape, true));
          ++cases;
        }
        if (elementwise::takes_scalar(binary.forms) && fits(shape.a, shape.out_layout)) {
          for (double scalar : {2.5, -1.5, 0.5, 3.0, 0.0}) {
            if (binary.op == BinaryOp::Div && scalar == 0.0) continue;
            Values kind = binary.op == BinaryOp::Pow ? Values::Positive : Values::Signed;
            Twin a = make_twin(shape.a, shape.a_layout, dtype, device, seed++, kind);
            Twin out = make_twin(shape.a, shape.out_layout, out_dtype, device, seed++, Values::Signed);
            kernels(device).binary_scalar(binary.op, a.tested, scalar, out.tested);
            kernels(Device::cpu()).binary_scalar(binary.op, a.reference, scalar, out.reference);
            compare_outputs(out, dtype,
                            describe("binary_scalar", binary.name, dtype, shape, false) + " scalar " +
                                std::to_string(scalar));
            ++cases;
          }
        }
      }
    }
  }
  return cases;
}

// ---- every other op, through the public API, forward and backward ----

struct Input {
  Shape sizes;
  Values kind = Values::Signed;
  Layout layout = Layout::Contiguous;
  // > 0: int64 indices in [0, index_bound), the same on both sides, not differentiated.
  int64_t index_bound = 0;
  // A module's parameter: float32 when the tested dtype is 16-bit (as the nn modules keep
  // them under autocast), else the tested dtype.
  bool parameter = false;
  bool differentiable = true;
};

struct OpCase {
  std::string name;
  std::vector<Input> inputs;
  // The op's outputs; the first is differentiated (with a random gradient) when floating.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  // Dtypes the op is defined for on every device (default: all floating ones).
  std::vector<DType> dtypes = {std::begin(kFloatingTypes), std::end(kFloatingTypes)};
  double slack = 4.0;  // times tolerance(dtype), of the largest |value|
};

inline std::vector<Tensor> outputs(std::tuple<Tensor, Tensor> pair) { return {std::get<0>(pair), std::get<1>(pair)}; }

inline const std::vector<OpCase>& op_cases() {
  using V = std::vector<Tensor>;
  using L = Layout;
  static const std::vector<OpCase> cases = {
      // reductions
      {"sum", {{{7, 13, 5}}}, [](const V& in) { return V{sum(in[0])}; }},
      {"sum over dims 0 and 2", {{{7, 13, 5}, Values::Signed, L::Transposed}},
       [](const V& in) { return V{sum(in[0], {0, 2})}; }},
      {"sum over dim 1, keepdim", {{{5, 1031}}}, [](const V& in) { return V{sum(in[0], {1}, true)}; }},
      {"mean over dim 0", {{{33, 17}, Values::Signed, L::Strided}}, [](const V& in) { return V{mean(in[0], {0})}; }},
      {"mean", {{{3, 5, 7}}}, [](const V& in) { return V{mean(in[0])}; }},
      {"max", {{{9, 11}}}, [](const V& in) { return V{max(in[0])}; }},
      {"amax over dim 1", {{{9, 11, 3}}}, [](const V& in) { return V{amax(in[0], {1})}; }},
      {"max along dim 0, and indices", {{{9, 11}}}, [](const V& in) { return outputs(max(in[0], 0)); }},
      {"argmax along dim 1", {{{9, 11}}}, [](const V& in) { return V{argmax(in[0], 1)}; }},
      {"topk 5 of each row", {{{6, 97}}}, [](const V& in) { return outputs(topk(in[0], 5)); }},
      {"topk 3 smallest along dim 0", {{{13, 4}}}, [](const V& in) { return outputs(topk(in[0], 3, 0, false)); }},
      // softmax
      {"softmax along the last dim", {{{7, 129}}}, [](const V& in) { return V{softmax(in[0], -1)}; }},
      {"softmax along dim 0", {{{7, 5, 3}}}, [](const V& in) { return V{softmax(in[0], 0)}; }},
      {"log_softmax along dim 1", {{{4, 1000}}}, [](const V& in) { return V{log_softmax(in[0], 1)}; }},
      // norms
      {"layer_norm with weight and bias",
       {{{6, 5, 48}}, {{48}, Values::Signed, L::Contiguous, 0, true}, {{48}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{layer_norm(in[0], {48}, in[1], in[2])}; }},
      {"layer_norm over two dims, no affine", {{{3, 7, 11}}},
       [](const V& in) { return V{layer_norm(in[0], {7, 11})}; }},
      {"add_layer_norm: the sum and its norm",
       {{{6, 5, 48}}, {{6, 5, 48}, Values::Signed, L::Strided}, {{48}, Values::Signed, L::Contiguous, 0, true},
        {{48}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) {
         const SumAndNorm result = add_layer_norm(in[0], in[1], {48}, in[2], in[3]);
         return V{result.sum, result.output};
       }},
      {"batch_norm training, (N, C, H, W)",
       {{{4, 3, 5, 7}}, {{3}, Values::Positive, L::Contiguous, 0, true}, {{3}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{batch_norm(in[0], {}, {}, in[1], in[2], true)}; }},
      {"batch_norm training, (N, C)",
       {{{16, 5}}, {{5}, Values::Positive, L::Contiguous, 0, true}, {{5}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{batch_norm(in[0], {}, {}, in[1], in[2], true)}; }},
      {"batch_norm evaluation",
       {{{4, 3, 5, 7}},
        {{3}, Values::Signed, L::Contiguous, 0, true, false},
        {{3}, Values::Positive, L::Contiguous, 0, true, false},
        {{3}, Values::Positive, L::Contiguous, 0, true},
        {{3}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{batch_norm(in[0], in[1], in[2], in[3], in[4], false)}; }},
      {"batch_norm_relu training",
       {{{4, 3, 5, 7}}, {{3}, Values::Positive, L::Contiguous, 0, true}, {{3}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{batch_norm_relu(in[0], {}, {}, in[1], in[2], true)}; }},
      {"batch_norm_add_relu training",
       {{{4, 3, 5, 7}}, {{4, 3, 5, 7}}, {{3}, Values::Positive, L::Contiguous, 0, true},
        {{3}, Values::Signed, L::Contiguous, 0, true}},
       [](const V& in) { return V{batch_norm_add_relu(in[0], in[1], {}, {}, in[2], in[3], true)}; }},
      // losses
      {"cross_entropy", {{{13, 29}}, {{13}, Values::Signed, L::Contiguous, 29}},
       [](const V& in) { return V{cross_entropy(in[0], in[1])}; }},
      {"cross_entropy, label smoothing, ignore_index, sum",
       {{{13, 29}}, {{13}, Values::Signed, L::Contiguous, 29}},
       [](const V& in) {
         return V{cross_entropy(in[0], in[1], {.reduction = Reduction::Sum, .label_smoothing = 0.1, .ignore_index = 3})};
       }},
      {"cross_entropy per sample, transposed logits",
       {{{29, 13}, Values::Signed, L::Transposed}, {{29}, Values::Signed, L::Contiguous, 13}},
       [](const V& in) { return V{cross_entropy(in[0], in[1], {.reduction = Reduction::None})}; }},
      {"nll_loss of log_softmax", {{{11, 7}}, {{11}, Values::Signed, L::Contiguous, 7}},
       [](const V& in) { return V{nll_loss(log_softmax(in[0], 1), in[1])}; }},
      {"mse_loss", {{{5, 9}}, {{5, 9}}}, [](const V& in) { return V{mse_loss(in[0], in[1])}; }},
      {"mse_loss per element", {{{5, 9}, Values::Signed, L::Strided}, {{5, 9}}},
       [](const V& in) { return V{mse_loss(in[0], in[1], Reduction::None)}; }},
      // the rest of what a model is made of
      {"matmul, batched and broadcast", {{{2, 7, 13}}, {{13, 5}, Values::Signed, L::Transposed}},
       [](const V& in) { return V{matmul(in[0], in[1])}; }},
      {"linear", {{{6, 17}}, {{9, 17}, Values::Signed, L::Contiguous, 0, false}, {{9}}},
       [](const V& in) { return V{linear(in[0], in[1], in[2])}; }},
      {"mlp, tanh gelu, hidden a multiple of 8 (cuBLASLt's GELU epilogues on CUDA)",
       {{{2, 3, 12}}, {{16, 12}}, {{16}}, {{12, 16}}, {{12}}},
       [](const V& in) { return V{mlp(in[0], in[1], in[2], in[3], in[4], GeluApproximate::Tanh)}; }},
      {"mlp, erf gelu, no biases, odd hidden", {{{5, 9}}, {{13, 9}}, {{7, 13}}},
       [](const V& in) { return V{mlp(in[0], in[1], Tensor(), in[2], Tensor(), GeluApproximate::None)}; }},
      {"embedding", {{{11, 6}}, {{3, 5}, Values::Signed, L::Contiguous, 11}},
       [](const V& in) { return V{embedding(in[0], in[1])}; }},
      {"gather along dim 1", {{{5, 9}}, {{5, 4}, Values::Signed, L::Contiguous, 9}},
       [](const V& in) { return V{gather(in[0], 1, in[1])}; }},
      {"index_select along dim 0", {{{7, 3, 4}}, {{5}, Values::Signed, L::Contiguous, 7}},
       [](const V& in) { return V{index_select(in[0], 0, in[1])}; }},
      {"masked_fill with a broadcast mask", {{{4, 6}}, {{1, 6}, Values::Signed, L::Contiguous, 2}},
       [](const V& in) { return V{masked_fill(in[0], in[1].to(DType::Bool), -1.5)}; }},
      {"conv2d, stride 2, padding 1", {{{2, 3, 9, 9}}, {{4, 3, 3, 3}}, {{4}}},
       [](const V& in) { return V{conv2d(in[0], in[1], in[2], {.stride = {2, 2}, .padding = {1, 1}})}; }},
      {"max_pool2d 3x3 stride 2", {{{2, 3, 9, 9}}},
       [](const V& in) { return V{max_pool2d(in[0], {.kernel_size = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})}; }},
      {"avg_pool2d 2x2", {{{2, 3, 8, 9}}},
       [](const V& in) { return V{avg_pool2d(in[0], {.kernel_size = {2, 2}})}; }},
      {"adaptive_avg_pool2d to 1x1", {{{2, 5, 7, 7}}},
       [](const V& in) { return V{adaptive_avg_pool2d(in[0], {1, 1})}; }},
      {"scaled_dot_product_attention, causal", {{{2, 3, 17, 16}}, {{2, 3, 17, 16}}, {{2, 3, 17, 16}}},
       [](const V& in) { return V{scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true})}; }},
  };
  return cases;
}

inline DType input_dtype(const Input& input, DType dtype) {
  if (input.index_bound > 0) return DType::Int64;
  if (input.parameter && (dtype == DType::Float16 || dtype == DType::BFloat16)) return DType::Float32;
  return dtype;
}

// Random int64 indices in [0, bound).
inline Tensor random_indices(const Shape& sizes, int64_t bound, uint64_t seed) {
  Tensor values = random_values(sizes, DType::Float64, seed, Values::Positive);
  std::vector<int64_t> indices;
  for (double v : values.to_vector<double>()) indices.push_back(static_cast<int64_t>(v * 7919) % bound);
  return from_vector(indices, sizes);
}

// One case in one dtype on `device`, forward and backward.
inline void check_op_case(const OpCase& op, DType dtype, Device device, uint64_t seed) {
  std::string what = op.name + ", " + dtype_name(dtype) + " on " + device.str();
  std::vector<Tensor> tested, reference;
  for (const Input& input : op.inputs) {
    if (input.index_bound > 0) {
      Tensor indices = random_indices(input.sizes, input.index_bound, seed++);
      tested.push_back(indices.to(device));
      reference.push_back(indices);
      continue;
    }
    Twin twin = make_twin(input.sizes, input.layout, input_dtype(input, dtype), device, seed++, input.kind);
    if (input.differentiable) {
      twin.tested.requires_grad_();
      twin.reference.requires_grad_();
    }
    tested.push_back(twin.tested);
    reference.push_back(twin.reference);
  }
  std::vector<Tensor> tested_out = op.run(tested);
  std::vector<Tensor> reference_out = op.run(reference);
  REQUIRE(tested_out.size() == reference_out.size());
  for (size_t i = 0; i < tested_out.size(); ++i) {
    CHECK(tested_out[i].device() == device);
    check_matches(tested_out[i], reference_out[i], dtype, false, op.slack, what + ", output " + std::to_string(i));
  }
  if (!tested_out[0].requires_grad()) return;
  Tensor gradient = random_values(tested_out[0].sizes(), tested_out[0].dtype(), seed++, Values::Signed);
  tested_out[0].backward(gradient.to(device));
  reference_out[0].backward(converted_copy(gradient, DType::Float64, Device::cpu()));
  for (size_t i = 0; i < tested.size(); ++i) {
    if (!tested[i].requires_grad()) continue;
    REQUIRE(tested[i].grad().defined() == reference[i].grad().defined());
    if (!tested[i].grad().defined()) continue;
    check_matches(tested[i].grad(), reference[i].grad(), dtype, false, op.slack,
                  what + ", gradient of input " + std::to_string(i));
  }
}

// Every case in every dtype it is defined for; returns how many (case, dtype) pairs ran.
inline int64_t check_op_cases(Device device) {
  int64_t count = 0;
  uint64_t seed = 500000;
  for (const OpCase& op : op_cases()) {
    for (DType dtype : op.dtypes) {
      check_op_case(op, dtype, device, seed += 100);
      ++count;
    }
  }
  return count;
}

}  // namespace every_op
