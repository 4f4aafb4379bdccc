// autograd/attention.cpp — scaled dot-product attention (autograd room): the argument
// checks, the choice between the math and the fused path, and both paths, forward and
// backward.
//
// The math path is a composition of differentiable ops (matmul, masked_fill or add,
// softmax, dropout, matmul), so its gradient comes from theirs and it takes every option.
// The fused path is one kernel call each way (core/kernels.h, attention_forward and
// attention_backward) and one node that saves q, k, v, the output and the log-sum-exp;
// a selective checkpoint keeping OpKind::Attention keeps those last two.
#include "memgrad/autograd/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autocast/cast_policy.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/masked_fill.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/selective_checkpoint.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/memory/context.h"
#include "memgrad/memory/simulated_target.h"

namespace mg {

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::Auto: return "auto";
    case AttentionBackend::Math: return "math";
    case AttentionBackend::Fused: return "fused";
  }
  return "auto";
}

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// The dtype x has once autocast (a lower-precision op here, like matmul) has cast it.
DType autocast_dtype_of(const Tensor& x) {
  return amp::autocast_cast_dtype(x, amp::CastPolicy::LowerPrecision).value_or(x.dtype());
}

Shape leading_sizes(const Tensor& x) { return Shape(x.sizes().begin(), x.sizes().end() - 2); }

void check_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  autograd::check_defined(kOp, q);
  autograd::check_defined(kOp, k);
  autograd::check_defined(kOp, v);
  autograd::check_same_device(kOp, q, k);
  autograd::check_same_device(kOp, q, v);
  autograd::check_floating(kOp, q);
  const DType dtype = autocast_dtype_of(q);
  MG_CHECK(autocast_dtype_of(k) == dtype && autocast_dtype_of(v) == dtype, kOp, ": q, k and v must have one "
           "dtype, got ", q.dtype(), ", ", k.dtype(), " and ", v.dtype(), ". Hint: convert them with .to(",
           q.dtype(), ").");
  MG_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp, ": q, k and v must have one rank of at "
           "least 2, (..., T, head_dim), got shapes ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  MG_CHECK(leading_sizes(k) == leading_sizes(q) && leading_sizes(v) == leading_sizes(q), kOp, ": q, k and v "
           "must have the same leading (batch, heads) dims, got shapes ", q.sizes(), ", ", k.sizes(), " and ",
           v.sizes());
  const int64_t head_dim = q.sizes().back(), queries = q.sizes()[q.dim() - 2], keys = k.sizes()[k.dim() - 2];
  MG_CHECK(k.sizes().back() == head_dim, kOp, ": q and k must have the same head_dim (last dim), got q of shape ",
           q.sizes(), " and k of shape ", k.sizes());
  MG_CHECK(v.sizes()[v.dim() - 2] == keys, kOp, ": k and v must have the same number of keys (dim -2), got k of "
           "shape ", k.sizes(), " and v of shape ", v.sizes());
  MG_CHECK(options.dropout_p >= 0.0 && options.dropout_p < 1.0, kOp, ": dropout_p must be in [0, 1), got ",
           options.dropout_p);
  const Tensor& mask = options.attn_mask;
  if (!mask.defined()) return;
  MG_CHECK(!options.is_causal, kOp, ": attn_mask and is_causal cannot both be set (as in PyTorch). Hint: fold "
           "the causal rule into the mask, or drop the mask and keep is_causal.");
  autograd::check_same_device(kOp, q, mask);
  MG_CHECK(mask.dtype() == DType::Bool || autocast_dtype_of(mask) == dtype, kOp, ": attn_mask must be bool or "
           "have the dtype of q (", q.dtype(), "), got ", mask.dtype(), ". Hint: convert it with .to(", q.dtype(), ").");
  Shape scores = leading_sizes(q);  // (..., Tq, Tk)
  scores.push_back(queries);
  scores.push_back(keys);
  MG_CHECK(autograd::broadcasts_to(mask.sizes(), scores), kOp, ": attn_mask of shape ", mask.sizes(), " does not broadcast to the attention weights' "
           "shape ", scores, " (..., Tq, Tk). Hint: give the mask size 1 in the dims it shares.");
}

// Empty when the fused path applies to these (already checked) arguments, else the rule it
// breaks. `dtype` is the one the op computes in (after autocast).
std::string fused_rule_broken(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                              DType dtype) {
  if (options.attn_mask.defined()) return "fused attention takes no attn_mask (is_causal is its only mask)";
  if (q.dim() != 3 && q.dim() != 4) {
    return detail::str_cat("fused attention needs 3-D or 4-D tensors (B, H, T, head_dim), got shape ", q.sizes());
  }
  for (const Tensor* x : {&q, &k, &v}) {
    if (x->sizes().back() > 1 && x->strides().back() != 1) {
      return detail::str_cat("fused attention needs unit stride in the last dim of q, k and v, got a tensor of "
                             "shape ", x->sizes(), " with strides ", x->strides());
    }
  }
  const int64_t head_dim = q.sizes().back();
  if (v.sizes().back() != head_dim) {
    return detail::str_cat("fused attention needs v's head_dim equal to q's, got ", v.sizes().back(), " and ",
                           head_dim);
  }
  // CUDA's kernels: float16 / bfloat16 on tensor cores (rows of 8 elements), float32 on the
  // FP32 FMA units (any head_dim); both keep a query tile's head dims in shared memory.
  const bool sixteen_bit = is_16_bit_float(dtype);
  const bool cuda_takes = head_dim >= 1 && head_dim <= 128 &&
                          ((sixteen_bit && head_dim % 8 == 0) || dtype == DType::Float32);
  if (runs_as_cuda(q.device()) && !cuda_takes) {
    return detail::str_cat("fused attention on CUDA needs float32 with head_dim <= 128, or float16 or bfloat16 with "
                           "head_dim <= 128 and a multiple of 8, got ", dtype, " head_dim ", head_dim);
  }
  return {};
}

// ---- the math path ----

// (Tq, Tk) bool, true where key j comes after query i (PyTorch's top-left causal rule).
Tensor keys_after_query(int64_t queries, int64_t keys, Device device) {
  const TensorOptions indices{.dtype = DType::Int64, .device = device};
  return gt(reshape(arange(static_cast<double>(keys), indices), {1, keys}),
            reshape(arange(static_cast<double>(queries), indices), {queries, 1}));
}

// NOTE: q is scaled before the product, not the scores after it: the scaled copy is
// (..., Tq, D) where the scores are (..., Tq, Tk), so the pass costs Tq*D instead of Tq*Tk
// and the product saves it (for k's gradient) in place of q. The saved (..., Tq, Tk)
// weights are what make this path's ACTIVATION bytes quadratic in the sequence.
Tensor math_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                      double scale) {
  memory::OpScope scope("scaled_dot_product_attention[math]");
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  Tensor scores = matmul(mul(q, scale), transpose(k, -2, -1));  // (..., Tq, Tk)
  const Tensor& mask = options.attn_mask;
  if (options.is_causal) {
    scores = masked_fill(scores, keys_after_query(q.sizes()[q.dim() - 2], k.sizes()[k.dim() - 2], q.device()),
                         minus_infinity);
  } else if (mask.defined()) {
    scores = mask.dtype() == DType::Bool ? masked_fill(scores, eq(mask, 0.0), minus_infinity) : add(scores, mask);
  }
  Tensor weights = softmax(scores, -1);
  // dropout() draws weight (b, h, i, j) from the Philox block at its flat index in the
  // contiguous weights, ((b * H + h) * Tq + i) * Tk + j: AttentionParams' rule, so the
  // fused path drops the same weights for the same generator state.
  if (options.dropout_p > 0.0) weights = dropout(weights, options.dropout_p, /*training=*/true, options.generator);
  return matmul(weights, v);  // (..., Tq, Dv)
}

// ---- the fused path ----

// A 3-D (N, T, D) tensor as the (N, 1, T, D) view the kernels take; a 4-D one as itself.
Tensor as_4d(const Tensor& x) {
  if (x.dim() == 4) return x;
  const Shape& sizes = x.sizes();
  const Shape& strides = x.strides();
  return make_view(x, {sizes[0], 1, sizes[1], sizes[2]}, {strides[0], sizes[1] * strides[1], strides[1], strides[2]},
                   x.storage_offset());
}

// The offsets (in elements, relative to the lowest) at which q, k and v's gradients go in
// one buffer of 3 x q.numel() elements, when the three are sibling views that tile one
// dense region of one storage; else nothing. Precisely: one storage and dtype, one set of
// sizes and strides, offsets o, o + s, o + 2s in some order (s > 0), and the (3, ...) view
// that adds a dim of stride s is dense and without overlap: its strides, sorted (ignoring
// size-1 dims), are 1, then each the product of the sizes below it. The (B, T, 3, H, D)
// packing of split(c_attn(x), C, 2) viewed as heads gives exactly this, with s = C.
std::optional<std::array<int64_t, 3>> packed_offsets(const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor* x : {&k, &v}) {
    if (x->storage() != q.storage() || x->dtype() != q.dtype() || x->sizes() != q.sizes() ||
        x->strides() != q.strides()) {
      return std::nullopt;
    }
  }
  if (q.numel() == 0) return std::nullopt;
  std::array<int64_t, 3> sorted{q.storage_offset(), k.storage_offset(), v.storage_offset()};
  std::sort(sorted.begin(), sorted.end());
  const int64_t spacing = sorted[1] - sorted[0];
  if (spacing <= 0 || sorted[2] - sorted[1] != spacing) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> stride_and_size{{spacing, 3}};
  for (int d = 0; d < q.dim(); ++d) {
    if (q.sizes()[d] > 1) stride_and_size.emplace_back(q.strides()[d], q.sizes()[d]);
  }
  std::sort(stride_and_size.begin(), stride_and_size.end());
  int64_t dense_stride = 1;
  for (const auto& [stride, size] : stride_and_size) {
    if (stride != dense_stride) return std::nullopt;
    dense_stride *= size;
  }
  return std::array<int64_t, 3>{q.storage_offset() - sorted[0], k.storage_offset() - sorted[0],
                                v.storage_offset() - sorted[0]};
}

// Tensors for the fused backward to write q, k and v's gradients into. NOTE: when q, k and
// v are sibling views of one packed projection (packed_offsets), their gradients are views
// of ONE buffer with q, k and v's own strides and relative offsets, so the packed gradient
// is born whole: transpose's and view's backwards stay views and split's backward finds
// every piece already in place, where separate (B, H, T, D) gradients cost a reshape copy
// each plus split's copy into the packed gradient. Otherwise three contiguous tensors.
std::array<Tensor, 3> new_input_gradients(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (const std::optional<std::array<int64_t, 3>> offsets = packed_offsets(q, k, v)) {
    const Tensor buffer = autograd::new_output({3 * q.numel()}, q.dtype(), q);  // the (3, ...) region
    auto view_at = [&](int64_t offset) {
      return make_view(buffer, q.sizes(), q.strides(), buffer.storage_offset() + offset);
    };
    return {view_at((*offsets)[0]), view_at((*offsets)[1]), view_at((*offsets)[2])};
  }
  return {autograd::new_output(q.sizes(), q.dtype(), q), autograd::new_output(k.sizes(), k.dtype(), k),
          autograd::new_output(v.sizes(), v.dtype(), v)};
}

// float32, or float64 for float64 inputs (so that float64 checks are exact to rounding).
DType log_sum_exp_dtype(DType dtype) { return dtype == DType::Float64 ? DType::Float64 : DType::Float32; }

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                       double scale) {
  memory::OpScope scope("scaled_dot_product_attention[fused]");
  const Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  const int64_t batch = q4.sizes()[0], heads = q4.sizes()[1], queries = q4.sizes()[2], head_dim = q4.sizes()[3];
  const int64_t keys = k4.sizes()[2];

  // NOTE: the output's bytes are (B, Tq, H, D), seen as (B, H, Tq, D), as PyTorch's flash
  // path lays them out: the usual next step, out.transpose(1, 2).reshape(B, Tq, H * D), is
  // then a view instead of a copy.
  auto output4_of = [&](const Tensor& output_bytes) {
    return make_view(output_bytes, {batch, heads, queries, head_dim},
                     {queries * heads * head_dim, head_dim, heads * head_dim, 1}, output_bytes.storage_offset());
  };
  AttentionParams params{.scale = scale, .is_causal = options.is_causal, .dropout_p = options.dropout_p, .rng = {}};
  if (options.dropout_p > 0.0) {
    // NOTE: drawn outside the kept computation below, so that a selective checkpoint's
    // recompute, which takes the kept output, still moves the generator as the forward did.
    Generator& generator = options.generator ? *options.generator : default_generator();
    params.rng = generator.reserve(batch * heads * queries * keys, q.device());  // as dropout() on the weights
  }
  const Shape output_sizes{batch, queries, heads, head_dim};
  // The output and the log-sum-exp, both of which the backward reads.
  const std::vector<Tensor> results = autograd::kept_or_computed(
      OpKind::Attention, "scaled_dot_product_attention[fused]", output_sizes, q.dtype(), [&] {
        Tensor output_bytes = autograd::new_output(output_sizes, q.dtype(), q);
        Tensor log_sum_exp = autograd::new_output({batch, heads, queries}, log_sum_exp_dtype(q.dtype()), q);
        kernels(q.device()).attention_forward(q4, k4, v4, params, output4_of(output_bytes), log_sum_exp);
        return std::vector<Tensor>{output_bytes, log_sum_exp};
      });
  const Tensor& output_bytes = results[0];
  const Tensor& log_sum_exp = results[1];
  Tensor output4 = output4_of(output_bytes);
  // A 3-D input was (N, 1, Tq, D): its output bytes are (N, Tq, 1, D), a contiguous (N, Tq, D).
  Tensor output = q.dim() == 4 ? output4 : make_view(output_bytes, {batch, queries, head_dim},
                                                     contiguous_strides({batch, queries, head_dim}),
                                                     output_bytes.storage_offset());

  if (autograd::needs_grad(q, k, v)) {
    autograd::record(
        "ScaledDotProductFusedAttentionBackward", output, {q, k, v}, autograd::saved(q, k, v, output, log_sum_exp),
        [params](const autograd::Node& node, const Tensor& grad, const Tensor& saved_q, const Tensor& saved_k,
                 const Tensor& saved_v, const Tensor& saved_output, const Tensor& saved_log_sum_exp) {
          // The kernels read rows: the incoming gradient needs unit stride in its last dim.
          const bool rows_ok = grad.sizes().back() <= 1 || grad.strides().back() == 1;
          const Tensor grad_output = rows_ok ? grad : contiguous_copy(grad);
          auto [grad_q, grad_k, grad_v] = new_input_gradients(saved_q, saved_k, saved_v);
          kernels(grad.device()).attention_backward(as_4d(grad_output), as_4d(saved_q), as_4d(saved_k),
                                                    as_4d(saved_v), as_4d(saved_output), saved_log_sum_exp, params,
                                                    as_4d(grad_q), as_4d(grad_k), as_4d(grad_v));
          return std::vector<Tensor>{node.needs_input_grad(0) ? grad_q : Tensor(),
                                     node.needs_input_grad(1) ? grad_k : Tensor(),
                                     node.needs_input_grad(2) ? grad_v : Tensor()};
        });
  }
  return output;
}

Tensor attention_in_given_dtypes(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                                 AttentionBackend backend) {
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(q.sizes().back()));
  return backend == AttentionBackend::Fused ? fused_attention(q, k, v, options, scale)
                                            : math_attention(q, k, v, options, scale);
}

}  // namespace

// NOTE: on the CPU, Auto takes the math path. There the products run in Eigen's tuned
// GEMM, while the fused kernel's tiles are plain loops: measured on 2 cores with (8, 4, T,
// 64) float32 and T = 128 to 512, the fused forward is about as fast, its backward 1.5 to
// 3x slower. At the sequence lengths a CPU trains at the (Tq, Tk) matrix fits in memory;
// ask for Fused to save the bytes.
AttentionBackend attention_backend_for(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options) {
  check_arguments(q, k, v, options);
  if (options.backend == AttentionBackend::Math) return AttentionBackend::Math;
  const std::string broken = fused_rule_broken(q, k, v, options, autocast_dtype_of(q));
  if (options.backend == AttentionBackend::Fused) {
    MG_CHECK(broken.empty(), kOp, ": the fused path was asked for but does not apply: ", broken,
             ". Hint: use AttentionBackend::Auto (or Math) to fall back to the math path.");
    return AttentionBackend::Fused;
  }
  return broken.empty() && runs_as_cuda(q.device()) ? AttentionBackend::Fused : AttentionBackend::Math;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  const AttentionBackend backend = attention_backend_for(q, k, v, options);
  if (!amp::is_autocast_on_for(q)) return attention_in_given_dtypes(q, k, v, options, backend);
  // Autocast casts the inputs once, then steps aside (as PyTorch's dispatcher does below
  // its Autocast key): the inner softmax keeps the autocast dtype instead of making a
  // float32 copy of the (Tq, Tk) matrix, and the kernels see one dtype.
  AttentionOptions cast_options = options;
  cast_options.attn_mask = amp::cast_to_autocast_dtype(options.attn_mask);
  const Tensor cast_q = amp::cast_to_autocast_dtype(q), cast_k = amp::cast_to_autocast_dtype(k);
  const Tensor cast_v = amp::cast_to_autocast_dtype(v);
  amp::AutocastStateGuard autocast_off(amp::AutocastState{});
  return attention_in_given_dtypes(cast_q, cast_k, cast_v, cast_options, backend);
}

}  // namespace mg
