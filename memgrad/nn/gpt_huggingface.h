// nn/gpt_huggingface.h — loading a Hugging Face GPT-2 checkpoint (the model.safetensors of
// "gpt2", "gpt2-medium", "gpt2-large", or a fine-tune of them) into an nn::GPT.
//
// Such a file differs from a GPT's own state_dict in three ways, each handled here:
//   - its keys may lack the "transformer." prefix (GPT2Model's files) or carry it
//     (GPT2LMHeadModel's);
//   - its four projection weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) come from
//     Hugging Face's Conv1D layer and are stored (in, out): they are transposed to
//     nn::Linear's (out, in);
//   - older files hold the attention's causal-mask buffers ("h.<i>.attn.bias",
//     "h.<i>.attn.masked_bias"), which are not parameters: they are skipped. So is an
//     "lm_head.weight" when the model ties it to the token table (it is the same values).
// Everything else is checked strictly: every parameter present with its exact shape.
#pragma once

#include <string>

#include "memgrad/nn/gpt.h"

namespace mg::nn {

// Loads `path` into `model` (whose options must match the checkpoint's sizes, e.g.
// GPTOptions::gpt2() for "gpt2"); a file that does not fit changes nothing.
void load_huggingface_gpt2(GPT& model, const std::string& path);

}  // namespace mg::nn
