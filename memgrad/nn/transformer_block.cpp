// nn/transformer_block.cpp — the feed-forward network and the pre-norm transformer block.
#include "memgrad/nn/transformer_block.h"

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/mlp.h"

namespace mg::nn {

MLP::MLP(const GPTOptions& options, Generator* generator) : Module("MLP") {
  int64_t width = options.n_embd, hidden = 4 * options.n_embd;
  c_fc = register_module("c_fc", std::make_shared<Linear>(width, hidden, options.bias, generator));
  gelu = register_module("gelu", std::make_shared<GELU>(options.gelu));
  c_proj = register_module("c_proj", std::make_shared<Linear>(hidden, width, options.bias, generator));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
}

// c_fc, gelu and c_proj as one op (mg::mlp), which keeps gelu's input but not its output
// for backward; the submodules stay for their parameters' names (state_dicts as before). A
// memory::Recorder sees the op under this module's path, e.g. "transformer.h.0.mlp" with op
// "mlp" (forward) and "MlpBackward" (backward), where it saw "...mlp.c_fc", "...mlp.gelu"
// and "...mlp.c_proj" before 2026-12-07; dropout keeps its own "...mlp.dropout".
Tensor MLP::forward(const Tensor& input) {
  return (*dropout)(mg::mlp(input, c_fc->weight, c_fc->bias, c_proj->weight, c_proj->bias, gelu->approximate()));
}

Block::Block(const GPTOptions& options, Generator* generator) : Module("Block") {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{options.n_embd}, options.layer_norm_eps,
                                                             true, options.bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(options, generator));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{options.n_embd}, options.layer_norm_eps,
                                                             true, options.bias));
  mlp = register_module("mlp", std::make_shared<MLP>(options, generator));
}

// The attention's residual add and ln_2 are one op (LayerNorm::forward_add): one pass over
// the hidden state each way instead of three; so are the previous block's MLP residual and
// ln_1 when that output comes pending.
Tensor Block::forward(const Tensor& input) {
  const DeferredResidual output = forward_deferred({.stream = input});
  return output.stream + output.pending;
}

DeferredResidual Block::forward_deferred(const DeferredResidual& input) {
  Tensor stream = input.stream, normed;
  if (input.pending.defined()) {
    SumAndNorm added = ln_1->forward_add(input.stream, input.pending);
    stream = added.sum;
    normed = added.output;
  } else {
    normed = (*ln_1)(stream);
  }
  auto [x, normed_2] = ln_2->forward_add(stream, (*attn)(normed));
  return {.stream = x, .pending = (*mlp)(normed_2)};
}

Tensor Block::forward(const Tensor& input, KVCache& cache, int64_t layer) {
  auto [x, normed] = ln_2->forward_add(input, attn->forward((*ln_1)(input), cache, layer));
  return x + (*mlp)(normed);
}

}  // namespace mg::nn
