// nn/gpt.cpp — the GPT-2 model: embeddings, blocks (checkpointed or not), final norm and
// the (tied) language-model head; its initialisation and the presets of GPT-2's sizes.
#include "memgrad/nn/gpt.h"

#include <cmath>
#include <string>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/linear_cross_entropy.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/init.h"

namespace mg::nn {

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's initializer_range

// nanoGPT's _init_weights over the tree under `module`, then its residual scaling: every
// Linear and Embedding weight normal(0, 0.02), every Linear bias 0, and the projections
// that end a residual branch ("c_proj") normal(0, residual_std).
// NOTE: walks named_children() by hand: named_modules() needs a shared_ptr to the model,
// which does not exist yet inside its constructor.
void init_gpt_weights(const Module& module, double residual_std, Generator* generator) {
  for (const auto& [name, child] : module.named_children()) {
    if (auto* linear = dynamic_cast<Linear*>(child.get())) {
      init::normal_(linear->weight, 0.0, name == "c_proj" ? residual_std : kInitStd, generator);
      if (linear->bias.defined()) init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<Embedding*>(child.get())) {
      init::normal_(embedding->weight, 0.0, kInitStd, generator);
    }
    init_gpt_weights(*child, residual_std, generator);
  }
}

}  // namespace

GPTOptions GPTOptions::gpt2() {
  GPTOptions options;
  options.vocab_size = 50257;
  return options;
}

GPTOptions GPTOptions::gpt2_medium() {
  GPTOptions options = gpt2();
  options.n_layer = 24;
  options.n_head = 16;
  options.n_embd = 1024;
  return options;
}

GPTOptions GPTOptions::gpt2_large() {
  GPTOptions options = gpt2();
  options.n_layer = 36;
  options.n_head = 20;
  options.n_embd = 1280;
  return options;
}

GPTOptions GPTOptions::gpt2_xl() {
  GPTOptions options = gpt2();
  options.n_layer = 48;
  options.n_head = 25;
  options.n_embd = 1600;
  return options;
}

// ---- the transformer trunk ----

GPTTransformer::GPTTransformer(const GPTOptions& options, Generator* generator)
    : Module("GPTTransformer"), checkpoint_(options.checkpoint), checkpoint_policy_(options.checkpoint_policy) {
  MG_CHECK(options.n_layer > 0 && options.vocab_size > 0 && options.block_size > 0, "GPT: n_layer=",
           options.n_layer, ", vocab_size=", options.vocab_size, ", block_size=", options.block_size,
           " must all be positive. Hint: start from a preset such as GPTOptions::gpt2()");
  auto table = [&](int64_t rows) { return std::make_shared<Embedding>(rows, options.n_embd, std::nullopt, generator); };
  wte = register_module("wte", table(options.vocab_size));
  wpe = register_module("wpe", table(options.block_size));
  drop = register_module("drop", std::make_shared<Dropout>(options.dropout));
  h = register_module("h", std::make_shared<ModuleList>());
  for (int64_t layer = 0; layer < options.n_layer; ++layer) h->push_back(std::make_shared<Block>(options, generator));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{options.n_embd}, options.layer_norm_eps, true,
                                                             options.bias));
}

Tensor GPTTransformer::embed(const Tensor& tokens, int64_t first_position) {
  MG_CHECK(tokens.dim() == 2, "GPT: expected token ids of shape (B, T), got ", tokens.sizes(),
           ". Hint: a single sequence is tokens.unsqueeze(0)");
  MG_CHECK(tokens.dtype() == DType::Int64 || tokens.dtype() == DType::Int32, "GPT: token ids must be integers ",
           "(int64 or int32), got ", tokens.dtype(), " of shape ", tokens.sizes());
  int64_t sequence = tokens.size(1), block_size = wpe->num_embeddings();
  MG_CHECK(first_position + sequence <= block_size, "GPT: the sequence has T=", sequence, " tokens",
           first_position > 0 ? detail::str_cat(" after ", first_position, " cached ones") : std::string(),
           " but block_size=", block_size, " is the longest the position table covers. Hint: crop the input to its ",
           "last ", block_size, " tokens (with a KV cache: clear() it first), or build the model with a larger ",
           "block_size");

  // NOTE: wpe(arange(first, first + T)) is rows first.. of the position table: taken as a
  // view, the positions need no index tensor (on a GPU, a host-to-device copy every step)
  // and the gradient is the same (the other rows get zeros).
  Tensor positions = narrow(wpe->weight, 0, first_position, sequence);  // (T, C)
  return (*drop)((*wte)(tokens) + positions);                            // (B, T, C)
}

Tensor GPTTransformer::forward(const Tensor& tokens) {
  Tensor x = embed(tokens, 0);  // (B, T, C)

  const BlockCheckpoint mode = is_training() ? checkpoint_ : BlockCheckpoint::None;
  // Each block is called as (*h)(x) would call it, so a Recorder names them "h.0", ...
  NamedCall call(*h);
  if (mode == BlockCheckpoint::None) {
    // Each MLP's residual add deferred into the next layer norm's kernel (Block::forward_deferred).
    DeferredResidual stream{.stream = x};
    for (const std::shared_ptr<Module>& block : *h) {
      NamedCall block_call(*block);
      stream = static_cast<Block&>(*block).forward_deferred(stream);
    }
    return ln_f->forward_add(stream.stream, stream.pending).output;
  }
  for (const std::shared_ptr<Module>& block : *h) {
    // NOTE: one checkpoint segment per block (its input one tensor, so no residual deferred
    // across it); the node keeps its block (a shared_ptr) until backward recomputes it.
    x = run_block(mode, checkpoint_policy_, [block](const Tensor& block_input) { return (*block)(block_input); }, x);
  }
  return (*ln_f)(x);
}

Tensor GPTTransformer::forward(const Tensor& tokens, KVCache& cache) {
  MG_CHECK(tokens.dim() < 1 || tokens.size(0) == cache.batch(), "GPT: token ids of shape ", tokens.sizes(),
           " for a KV cache of batch ", cache.batch(), ". Hint: one cache per batch size");
  MG_CHECK(cache.n_layer() == static_cast<int64_t>(h->size()), "GPT: a KV cache of ", cache.n_layer(),
           " layers for a model of ", h->size(), ". Hint: KVCache(model.options(), batch)");
  Tensor x = embed(tokens, cache.length());  // (B, T, C)
  for (size_t layer = 0; layer < h->size(); ++layer) {
    x = static_cast<Block&>(*(*h)[layer]).forward(x, cache, static_cast<int64_t>(layer));
  }
  cache.advance(tokens.size(1));
  return (*ln_f)(x);
}

// ---- the head ----

LMHead::LMHead(int64_t n_embd, int64_t vocab_size, Generator* generator) : Module("LMHead"), tied_(false) {
  weight = register_parameter("weight", empty({vocab_size, n_embd}));
  init::normal_(weight, 0.0, kInitStd, generator);
}

LMHead::LMHead(Tensor tied_weight) : Module("LMHead"), weight(std::move(tied_weight)), tied_(true) {
  MG_CHECK(weight.defined() && weight.dim() == 2, "LMHead: the tied weight must be a (vocab_size, n_embd) table");
}

Tensor LMHead::forward(const Tensor& input) { return linear(input, weight); }

std::string LMHead::extra_repr() const {
  return detail::str_cat("in_features=", weight.size(1), ", out_features=", weight.size(0),
                         ", tied=", tied_ ? "true" : "false");
}

// ---- the model ----

GPT::GPT(GPTOptions options, Generator* generator) : Module("GPT"), options_(options) {
  transformer = register_module("transformer", std::make_shared<GPTTransformer>(options, generator));
  lm_head = register_module("lm_head", options.tie_embeddings
                                           ? std::make_shared<LMHead>(transformer->wte->weight)
                                           : std::make_shared<LMHead>(options.n_embd, options.vocab_size, generator));
  init_gpt_weights(*this, kInitStd / std::sqrt(2.0 * static_cast<double>(options.n_layer)), generator);
}

Tensor GPT::forward(const Tensor& tokens) { return (*lm_head)((*transformer)(tokens)); }

Tensor GPT::forward(const Tensor& tokens, KVCache& cache) { return (*lm_head)(transformer->forward(tokens, cache)); }

Tensor GPT::loss(const Tensor& tokens, const Tensor& targets, const CrossEntropyOptions& options) {
  MG_CHECK(targets.defined() && tokens.defined() && targets.sizes() == tokens.sizes(), "GPT::loss: targets of shape ",
           targets.defined() ? targets.sizes() : Shape{}, " do not match tokens of shape ",
           tokens.defined() ? tokens.sizes() : Shape{}, "; expected one target token per input token");
  // Named as calls of the model and of its head (a memory::Recorder's module paths:
  // "transformer.h.0.attn", "lm_head"), though the loss is not forward() and the head's
  // matmul is fused into it rather than called.
  NamedCall call(*this);
  const Tensor hidden = (*transformer)(tokens);  // (B, T, n_embd)
  NamedCall head(*lm_head);
  return linear_cross_entropy(hidden.view({-1, hidden.size(-1)}), lm_head->weight, targets.view({-1}), options);
}

double GPT::training_flops_per_token() const {
  const double layers = static_cast<double>(options_.n_layer), width = static_cast<double>(options_.n_embd);
  const double window = static_cast<double>(options_.block_size);
  return 6.0 * static_cast<double>(num_parameters()) + 12.0 * layers * window * width;
}

int64_t GPT::num_parameters(bool exclude_position_embeddings) const {
  int64_t count = Module::num_parameters();
  return exclude_position_embeddings ? count - transformer->wpe->weight.numel() : count;
}

}  // namespace mg::nn
