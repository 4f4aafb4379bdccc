// nn/attention.cpp — causal self-attention: one packed projection, heads as views of it,
// scaled_dot_product_attention, and the output projection.
#include "memgrad/nn/attention.h"

#include <tuple>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/split.h"
#include "memgrad/core/factory.h"

namespace mg::nn {

CausalSelfAttention::CausalSelfAttention(const GPTOptions& options, Generator* generator)
    : Module("CausalSelfAttention"), n_head_(options.n_head), n_embd_(options.n_embd), backend_(options.attention) {
  MG_CHECK(options.n_head > 0 && options.n_embd > 0, "CausalSelfAttention: n_embd=", options.n_embd,
           " and n_head=", options.n_head, " must be positive");
  MG_CHECK(options.n_embd % options.n_head == 0, "CausalSelfAttention: n_embd=", options.n_embd,
           " is not divisible by n_head=", options.n_head, "; each of the heads takes n_embd / n_head ",
           "channels. Hint: pick n_head among the divisors of n_embd (GPT-2: 768 / 12 = 64)");
  c_attn = register_module("c_attn", std::make_shared<Linear>(n_embd_, 3 * n_embd_, options.bias, generator));
  c_proj = register_module("c_proj", std::make_shared<Linear>(n_embd_, n_embd_, options.bias, generator));
  attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(options.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(options.dropout));
}

namespace {

// (T_new, cached + T_new) bool, true where new query i (position cached + i) may see key j:
// j <= cached + i. The causal mask of the last T_new rows of the full (T, T) matrix.
Tensor keys_up_to_query(int64_t cached, int64_t queries, Device device) {
  const TensorOptions indices{.dtype = DType::Int64, .device = device};
  const int64_t keys = cached + queries;
  return le(arange(static_cast<double>(keys), indices).view({1, keys}),
            arange(static_cast<double>(cached), static_cast<double>(keys), 1.0, indices).view({queries, 1}));
}

}  // namespace

Tensor CausalSelfAttention::forward(const Tensor& input) { return attend(input, nullptr, 0); }

Tensor CausalSelfAttention::forward(const Tensor& input, KVCache& cache, int64_t layer) {
  return attend(input, &cache, layer);
}

Tensor CausalSelfAttention::attend(const Tensor& input, KVCache* cache, int64_t layer) {
  MG_CHECK(input.dim() == 3 && input.size(2) == n_embd_, "CausalSelfAttention: expected an input of shape (B, T, ",
           n_embd_, "), got ", input.sizes(), "; the last dim must be the model's n_embd");
  int64_t batch = input.size(0), sequence = input.size(1);
  int64_t head_dim = n_embd_ / n_head_;

  // NOTE: split gives q, k and v as views sharing one node, whose backward writes their
  // three gradients side by side into one (B, T, 3C) tensor: the layout c_attn's backward
  // reads, so no gradient is gathered from three separate buffers.
  std::vector<Tensor> qkv = split((*c_attn)(input), n_embd_, 2);  // three (B, T, C) views of (B, T, 3C)
  auto heads = [&](const Tensor& projection) {
    return projection.view({batch, sequence, n_head_, head_dim}).transpose(1, 2);  // (B, H, T, D), strided
  };

  AttentionOptions attention;
  attention.dropout_p = is_training() ? attn_dropout->p() : 0.0;
  attention.backend = backend_;
  Tensor keys = heads(qkv[1]), values = heads(qkv[2]);  // (B, H, T, D)
  const int64_t cached = cache != nullptr ? cache->length() : 0;
  if (cache != nullptr) std::tie(keys, values) = cache->append(layer, keys, values);  // (B, H, cached + T, D)
  // NOTE: one new query sees every key and needs no mask, which leaves the fused path open
  // on CUDA for the common decoding step; with nothing cached the rule is is_causal's.
  if (cached == 0) {
    attention.is_causal = true;
  } else if (sequence > 1) {
    attention.attn_mask = keys_up_to_query(cached, sequence, input.device());
  }
  Tensor y = scaled_dot_product_attention(heads(qkv[0]), keys, values, attention);  // (B, H, T, D)
  // A view when the output's memory is (B, T, H, D) (the fused path's), else one copy.
  y = y.transpose(1, 2).reshape({batch, sequence, n_embd_});
  return (*resid_dropout)((*c_proj)(y));
}

std::string CausalSelfAttention::extra_repr() const {
  return detail::str_cat("n_head=", n_head_, ", backend=", attention_backend_name(backend_));
}

}  // namespace mg::nn
