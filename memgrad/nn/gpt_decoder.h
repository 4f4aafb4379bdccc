// nn/gpt_decoder.h — GPTDecoder: the next token's logits for a growing sequence, through a
// KV cache, so that each call runs the model over the tokens added since the last call
// only (one, when sampling), not over the whole window.
//
// When the cache cannot take the new tokens (the window of block_size positions is full),
// it starts again from the last block_size / 2 tokens (or the last min(new, block_size),
// when more are new): GPT-2's positions are learned absolute ones, so the window cannot
// slide without recomputing every cached key. One refill over block_size / 2 tokens every
// block_size / 2 steps costs about as much as one extra step each, where recomputing the
// window every step costs a block_size-token forward per token.
//
// NOTE: so past the first block_size tokens the logits see between block_size / 2 and
// block_size tokens of context, where a full forward over the last block_size tokens sees
// block_size always; context_start() says which tokens the last logits saw, and the logits
// are those of a full forward over exactly those (tests/nn/test_gpt_decoder.cpp).
#pragma once

#include <cstdint>

#include "memgrad/core/tensor.h"
#include "memgrad/nn/gpt.h"
#include "memgrad/nn/kv_cache.h"

namespace mg::nn {

class GPTDecoder {
 public:
  // For `batch` sequences; `model` must outlive the decoder.
  GPTDecoder(GPT& model, int64_t batch);

  // `tokens` (B, T) int64: the whole sequence so far, the previous call's `tokens` with at
  // least one more at the end -> the logits (B, vocab_size) of the token after the last.
  // Without autograd only (nn/kv_cache.h), in the model's current mode (eval for sampling).
  Tensor next_logits(const Tensor& tokens);

  // The first token the last logits saw: 0 until the window first fills.
  int64_t context_start() const { return start_; }
  const KVCache& cache() const { return cache_; }

 private:
  GPT& model_;
  KVCache cache_;
  int64_t start_ = 0;  // tokens[start_, start_ + cache_.length()) are cached
};

}  // namespace mg::nn
