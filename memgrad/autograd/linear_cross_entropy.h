// autograd/linear_cross_entropy.h — cross_entropy(linear(hidden, weight), target) for a
// language model's head, without its (N, V) logits: the logits are made a chunk of rows at
// a time, and each chunk's gradients (with respect to the hidden states and the weight) are
// taken right away, while the chunk is at hand.
//
// Why: GPT-2's head at batch 16 x 1024 tokens makes 16,384 x 50,304 logits: 1.6 GB in
// bfloat16, which cross_entropy must keep for its backward. Here the backward keeps the two
// gradients instead, unscaled and in float32: (N, C) and (V, C), 50 MB and 154 MB for GPT-2.
// The arithmetic is the same three products as linear + cross_entropy; the gradient of a
// mean or sum is a scalar times the per-row gradients, so they can be formed before the
// scalar is known and scaled in the backward.
//
//   mg::Tensor loss = mg::linear_cross_entropy(hidden.view({-1, C}), lm_head_weight, targets.view({-1}));
//
// Reduction::None needs a gradient per sample, which does not factor out: it runs as
// cross_entropy(linear(...)) (the logits materialised). Autocast casts hidden and weight
// to the autocast dtype (as linear) and gives a float32 loss (as cross_entropy).
#pragma once

#include <cstdint>

#include "memgrad/autograd/loss.h"

namespace mg {

// hidden (N, C), weight (V, C) (as a Linear's, no bias), target (N) int64 class indices.
// chunk_bytes bounds one chunk's logits (in the product's dtype); the last chunk may be
// smaller, all others equal.
Tensor linear_cross_entropy(const Tensor& hidden, const Tensor& weight, const Tensor& target,
                            const CrossEntropyOptions& options = {}, int64_t chunk_bytes = int64_t{256} << 20);

}  // namespace mg
