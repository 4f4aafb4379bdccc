// nn/gpt.h — GPT: OpenAI's GPT-2 language model (Radford et al. 2019) as nanoGPT builds
// it, with Hugging Face's parameter names, so that a GPT-2 checkpoint's keys are this
// model's state_dict keys:
//
//   transformer.wte.weight            (vocab_size, n_embd)  token embeddings
//   transformer.wpe.weight            (block_size, n_embd)  position embeddings
//   transformer.h.<i>.ln_1.weight/.bias, .attn.c_attn.*, .attn.c_proj.*, .ln_2.*,
//                     .mlp.c_fc.*, .mlp.c_proj.*
//   transformer.ln_f.weight/.bias
//   lm_head.weight                    only when untied; tied, it IS transformer.wte.weight
//
// NOTE: the four projection weights (c_attn, attn.c_proj, c_fc, mlp.c_proj) are nn::Linear's
// (out, in), as in nanoGPT's model; Hugging Face's files store them transposed, as (in, out),
// because its GPT-2 uses a Conv1D layer: nn::load_huggingface_gpt2 (nn/gpt_huggingface.h)
// transposes them while loading such a file.
//
// Memory: gpt2() holds 124,439,808 parameters (475 MiB in float32). Per block the math
// attention path saves a (B, n_head, T, T) matrix besides the linear layers' inputs;
// GPTOptions::checkpoint keeps only each block's input (Whole), or that and its matmuls'
// and attention's outputs (Selective), through the forward.
#pragma once

#include <cstdint>
#include <memory>

#include "memgrad/autograd/loss.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/container.h"
#include "memgrad/nn/embedding.h"
#include "memgrad/nn/gpt_options.h"
#include "memgrad/nn/kv_cache.h"
#include "memgrad/nn/layer_norm.h"
#include "memgrad/nn/module.h"
#include "memgrad/nn/transformer_block.h"

namespace mg::nn {

// Tokens to final hidden states: embeddings, the blocks, the last LayerNorm (Hugging
// Face's GPT2Model). The GPT registers it as "transformer".
class GPTTransformer : public Module {
 public:
  explicit GPTTransformer(const GPTOptions& options, Generator* generator = nullptr);
  // (B, T) int64 or int32 token ids, T <= block_size -> (B, T, n_embd).
  Tensor forward(const Tensor& tokens) override;
  // The T tokens after the cache's length() ones, at positions length() .. length() + T - 1
  // (length() + T <= block_size), attending to the cached tokens and to each other
  // causally; their keys and values join the cache. Without autograd only (nn/kv_cache.h).
  Tensor forward(const Tensor& tokens, KVCache& cache);

  std::shared_ptr<Embedding> wte;  // (vocab_size, n_embd)
  std::shared_ptr<Embedding> wpe;  // (block_size, n_embd)
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList> h;   // n_layer Blocks
  std::shared_ptr<LayerNorm> ln_f;

 private:
  // The token ids' checks and their embeddings plus those of positions first .. first + T - 1.
  Tensor embed(const Tensor& tokens, int64_t first_position);

  BlockCheckpoint checkpoint_;
  CheckpointPolicy checkpoint_policy_;
};

// Hidden states to logits, without bias: (*, n_embd) -> (*, vocab_size).
class LMHead : public Module {
 public:
  // Untied: its own weight, registered as "weight", normal(0, 0.02).
  LMHead(int64_t n_embd, int64_t vocab_size, Generator* generator = nullptr);
  // Tied: multiplies by `tied_weight` (vocab_size, n_embd), the token table, and registers
  // nothing, so the one tensor is listed once, under its owner's name.
  explicit LMHead(Tensor tied_weight);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // "in_features=768, out_features=50257, tied=true"
  bool tied() const { return tied_; }

  Tensor weight;  // (vocab_size, n_embd)

 private:
  bool tied_;
};

class GPT : public Module {
 public:
  // Every weight drawn from `generator` (default: the process-wide one) as nanoGPT and
  // GPT-2 initialise them: Linear and Embedding weights normal(0, 0.02), the residual
  // projections (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2 n_layer)) so the
  // residual stream's variance does not grow with depth, biases 0, LayerNorms 1 and 0.
  explicit GPT(GPTOptions options = {}, Generator* generator = nullptr);

  // (B, T) int64 or int32 token ids, T <= block_size -> logits (B, T, vocab_size).
  Tensor forward(const Tensor& tokens) override;
  // Incremental decoding: the logits (B, T, vocab_size) of T tokens that follow the cache's,
  // equal to the last T positions of forward() over the whole prefix. Under NoGradGuard;
  // see nn/kv_cache.h for what the cache holds and what happens when it is full.
  Tensor forward(const Tensor& tokens, KVCache& cache);
  // The cross-entropy of the logits forward() would give against `targets` (B, T) int64,
  // as cross_entropy(forward(tokens).view({-1, V}), targets.view({-1}), options), but through
  // linear_cross_entropy (autograd/linear_cross_entropy.h): the (B*T, V) logits are never
  // made whole, so neither they nor their gradient take memory (1.6 GB each for GPT-2 at
  // batch 16 in bfloat16).
  Tensor loss(const Tensor& tokens, const Tensor& targets, const CrossEntropyOptions& options = {});

  const GPTOptions& options() const { return options_; }
  // Elements in all parameters, the tied table counted once; without the position table
  // when asked (nanoGPT's "non-embedding" count, which keeps wte as lm_head's weight).
  int64_t num_parameters(bool exclude_position_embeddings = false) const;
  // The floating-point operations of one training step (forward and backward) per token of
  // a full block_size window: 6 N (a multiply-add per parameter forward, two backward)
  // plus 12 L T C (the attention's two products, forward and backward, over T = block_size
  // keys), N counting every parameter as llm.c's and PaLM's MFU estimates do. Model FLOPs:
  // what recomputation (checkpointing) repeats is not counted, so TFLOP/s from it compare
  // runs of one model.
  double training_flops_per_token() const;

  std::shared_ptr<GPTTransformer> transformer;
  std::shared_ptr<LMHead> lm_head;

 private:
  GPTOptions options_;
};

}  // namespace mg::nn
