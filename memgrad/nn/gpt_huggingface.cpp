// nn/gpt_huggingface.cpp — a Hugging Face GPT-2 checkpoint's tensors renamed, transposed
// and filtered into a GPT's state_dict (see the header for the three differences).
#include "memgrad/nn/gpt_huggingface.h"

#include <array>
#include <string_view>

#include "memgrad/core/error.h"
#include "memgrad/io/safetensors.h"

namespace mg::nn {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The weights Hugging Face's Conv1D stores as (in, out).
bool is_conv1d_weight(std::string_view name) {
  constexpr std::array<std::string_view, 4> kConv1dWeights = {".attn.c_attn.weight", ".attn.c_proj.weight",
                                                              ".mlp.c_fc.weight", ".mlp.c_proj.weight"};
  for (std::string_view suffix : kConv1dWeights) {
    if (ends_with(name, suffix)) return true;
  }
  return false;
}

bool is_attention_mask_buffer(std::string_view name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

}  // namespace

void load_huggingface_gpt2(GPT& model, const std::string& path) {
  const Device device = model.transformer->wte->weight.device();
  NamedTensors state;
  for (auto& [file_name, tensor] : load_safetensors(path, device)) {
    if (is_attention_mask_buffer(file_name)) continue;
    std::string name = file_name;
    if (name != "lm_head.weight" && name.rfind("transformer.", 0) != 0) name = "transformer." + name;
    if (name == "lm_head.weight" && model.lm_head->tied()) continue;
    if (is_conv1d_weight(name)) {
      MG_CHECK(tensor.dim() == 2, "load_huggingface_gpt2: '", file_name, "' in '", path,
               "' should be a 2-D Conv1D weight (in, out), got shape ", tensor.sizes(),
               ". Hint: is this a Hugging Face GPT-2 checkpoint?");
      tensor = tensor.t().contiguous();
    }
    state.emplace_back(std::move(name), tensor);
  }
  try {
    model.load_state_dict(state, /*strict=*/true);
  } catch (const Error& error) {
    throw Error(detail::str_cat("loading the Hugging Face GPT-2 checkpoint '", path, "': ", error.what(),
                                " Hint: build the GPT with the checkpoint's sizes (GPTOptions::gpt2(), "
                                "gpt2_medium(), gpt2_large()) and vocab_size 50257."));
  }
}

}  // namespace mg::nn
