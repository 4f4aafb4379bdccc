// nn/gpt_options.h — GPTOptions: the shape and training switches of a GPT-2 style model
// (nn/gpt.h), with the presets of OpenAI's GPT-2 sizes. Its own header so that the layers
// (nn/attention.h) take the options without including the whole model.
#pragma once

#include <cstdint>

#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/nn/block_checkpoint.h"

namespace mg::nn {

struct GPTOptions {
  int64_t n_layer = 12;       // transformer blocks
  int64_t n_head = 12;        // attention heads; n_embd must be a multiple of it
  int64_t n_embd = 768;       // width of the hidden state (C)
  int64_t block_size = 1024;  // longest sequence: rows of the position table
  // NOTE: nanoGPT's default, GPT-2's 50257 padded up to a multiple of 64 so the logits'
  // matmul tiles evenly; gpt2() uses the true 50257, which Hugging Face files hold.
  int64_t vocab_size = 50304;
  double dropout = 0.0;         // after the embeddings, on attention weights, after each residual branch
  bool bias = true;             // biases in the Linears and LayerNorms (GPT-2 has them)
  bool tie_embeddings = true;   // lm_head.weight IS transformer.wte.weight (GPT-2's tying)
  // In training, checkpoint every transformer block (nn/block_checkpoint.h): Whole keeps
  // only the blocks' inputs through the forward and recomputes each block when backward
  // reaches it (one more forward of the trunk per step); Selective also keeps the outputs
  // of checkpoint_policy's op kinds and recomputes only the rest (layer norms, GELU,
  // dropout, the residual adds, the math attention path's softmax).
  BlockCheckpoint checkpoint = BlockCheckpoint::None;
  CheckpointPolicy checkpoint_policy = CheckpointPolicy::matmul_and_attention();
  AttentionBackend attention = AttentionBackend::Auto;
  GeluApproximate gelu = GeluApproximate::Tanh;  // GPT-2's "gelu_new"
  double layer_norm_eps = 1e-5;

  static GPTOptions gpt2();         // 124M: 12 layers, 12 heads, 768 wide, vocab 50257, block 1024
  static GPTOptions gpt2_medium();  // 350M: 24 layers, 16 heads, 1024 wide
  static GPTOptions gpt2_large();   // 774M: 36 layers, 20 heads, 1280 wide
  static GPTOptions gpt2_xl();      // 1.5B: 48 layers, 25 heads, 1600 wide
};

}  // namespace mg::nn
