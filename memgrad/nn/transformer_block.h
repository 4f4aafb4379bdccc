// nn/transformer_block.h — the pieces of a GPT-2 block: MLP (the position-wise feed-forward
// network) and Block (pre-norm attention and MLP, each with a residual connection). Names
// as Hugging Face's GPT-2 and nanoGPT's: ln_1, attn, ln_2, mlp, mlp.c_fc, mlp.c_proj.
#pragma once

#include <memory>

#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/attention.h"
#include "memgrad/nn/gpt_options.h"
#include "memgrad/nn/layer_norm.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

// c_fc (C -> 4C), GELU (options.gelu), c_proj (4C -> C), dropout.
class MLP : public Module {
 public:
  explicit MLP(const GPTOptions& options, Generator* generator = nullptr);
  // (*, n_embd) -> (*, n_embd)
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Linear> c_fc;
  std::shared_ptr<GELU> gelu;
  std::shared_ptr<Linear> c_proj;
  std::shared_ptr<Dropout> dropout;
};

// The residual stream between two blocks with the first's MLP output not yet added
// (`pending`; undefined: nothing to add). The next layer norm adds it in its own kernel
// (LayerNorm::forward_add): a chain of blocks then makes no separate residual add, nor the
// 16-bit output's float32 copy, nor, in backward, the sum of the stream's two gradients.
struct DeferredResidual {
  Tensor stream;
  Tensor pending;
};

// x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
class Block : public Module {
 public:
  explicit Block(const GPTOptions& options, Generator* generator = nullptr);
  // (B, T, n_embd) -> (B, T, n_embd)
  Tensor forward(const Tensor& input) override;
  // The same with the residual adds deferred: the input's pending output is added by ln_1,
  // this block's MLP output is returned pending. forward(x) is forward_deferred({x}) with
  // its pending output added; the values are those of forward, bit for bit.
  DeferredResidual forward_deferred(const DeferredResidual& input);
  // The same for T new tokens after the cache's, as layer `layer` of the model
  // (CausalSelfAttention's cached forward).
  Tensor forward(const Tensor& input, KVCache& cache, int64_t layer);

  std::shared_ptr<LayerNorm> ln_1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<LayerNorm> ln_2;
  std::shared_ptr<MLP> mlp;
};

}  // namespace mg::nn
