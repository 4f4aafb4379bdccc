// nn/attention.h — CausalSelfAttention: GPT-2's multi-head self-attention, each position
// attending to itself and the positions before it. Names as Hugging Face's GPT-2 and
// nanoGPT's: c_attn (the packed query/key/value projection) and c_proj (the output
// projection).
//
// Memory: c_attn's output (B, T, 3C) is the only copy of q, k and v; the heads are strided
// views of it. What attention saves for backward depends on the path (autograd/attention.h):
// the math path keeps a (B, H, T, T) matrix of weights, the fused path one float per query.
#pragma once

#include <memory>

#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/gpt_options.h"
#include "memgrad/nn/kv_cache.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class CausalSelfAttention : public Module {
 public:
  // Uses options.n_embd, n_head (n_embd must be a multiple of it), bias, dropout and
  // attention; the Linears start as nn::Linear's (GPT re-initialises them as GPT-2 does).
  explicit CausalSelfAttention(const GPTOptions& options, Generator* generator = nullptr);

  // (B, T, n_embd) -> (B, T, n_embd). Dropout on the attention weights and on the output
  // in training mode only.
  Tensor forward(const Tensor& input) override;
  // Incremental decoding: `input` (B, T_new, n_embd) holds the tokens after the cache's
  // length() cached ones; their keys and values join layer `layer`'s in the cache, and
  // each new query attends to the cached keys and to the new ones up to itself. The same
  // numbers as forward() over the whole prefix, for the new positions. Without autograd only.
  Tensor forward(const Tensor& input, KVCache& cache, int64_t layer);
  std::string extra_repr() const override;  // "n_head=12, backend=auto"

  int64_t n_head() const { return n_head_; }
  int64_t n_embd() const { return n_embd_; }

  std::shared_ptr<Linear> c_attn;          // n_embd -> 3 n_embd: q, k, v side by side
  std::shared_ptr<Linear> c_proj;          // n_embd -> n_embd
  std::shared_ptr<Dropout> attn_dropout;   // its p is attention's dropout_p (inside the op)
  std::shared_ptr<Dropout> resid_dropout;  // on the output

 private:
  // Both forwards: without a cache, plain causal attention over `input`.
  Tensor attend(const Tensor& input, KVCache* cache, int64_t layer);

  int64_t n_head_;
  int64_t n_embd_;
  AttentionBackend backend_;
};

}  // namespace mg::nn
