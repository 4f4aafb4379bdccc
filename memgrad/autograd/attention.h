// autograd/attention.h — scaled dot-product attention with PyTorch's semantics:
// softmax(q k^T * scale + mask) v over (batch..., heads, seq, head_dim) tensors.
//
// Two paths compute it. The math path materialises the (Tq, Tk) matrix of weights and
// saves it for backward: its ACTIVATION bytes grow with the square of the sequence. The
// fused path (FlashAttention-2: tiles and an online softmax) saves only q, k, v, the output
// and one float32 log-sum-exp per query row (float64 for float64 inputs): its bytes grow
// linearly. Both draw dropout's mask the same way from the generator (one Philox block per
// weight, B * H * Tq * Tk in all), so they agree for one seed.
//
// Under autocast attention is a lower-precision op, like matmul: q, k, v (and a floating
// mask) are cast to the autocast dtype and the whole op runs in it.
#pragma once

#include <optional>

#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"

namespace mg {

enum class AttentionBackend {
  Auto,   // fused on CUDA where it applies (see attention_backend_for), else math
  Math,   // always the materialising reference path
  Fused,  // the fused path, or an mg::Error saying why it does not apply
};

const char* attention_backend_name(AttentionBackend backend);  // "auto", "math", "fused"

struct AttentionOptions {
  // bool (true: the pair takes part) or floating (added to the scores), broadcastable to
  // (..., Tq, Tk); undefined for none. Only the math path takes a mask.
  Tensor attn_mask;
  bool is_causal = false;  // query i attends to keys j <= i
  double dropout_p = 0.0;  // applied whenever > 0, as in PyTorch's functional form
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
  AttentionBackend backend = AttentionBackend::Auto;
  Generator* generator = nullptr;  // dropout's; default: the process-wide one
};

// q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) with equal leading dims -> (..., Tq, Dv).
// q, k and v may be strided views (e.g. heads split out of one packed projection); nothing
// is copied for them when their last dim has unit stride.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// The path scaled_dot_product_attention takes for these arguments (Math or Fused), or an
// mg::Error when options.backend forces one that does not apply. Fused applies without an
// attn_mask, to 3-D or 4-D (B, H, T, D) tensors with unit stride in the last dim and
// Dv == D; on CUDA also only to float16 / bfloat16 with D <= 128 and a multiple of 8 (tensor
// cores), or float32 with D <= 128 (FP32 arithmetic; float64 takes the math path). Auto
// takes it on CUDA only (the simulated device chooses as the device it stands in for); on
// the CPU the math path is faster, and Fused saves the memory.
AttentionBackend attention_backend_for(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options = {});

}  // namespace mg
