// tests/nn/test_gpt_huggingface.cpp — a Hugging Face GPT-2 checkpoint (keys with or without
// "transformer.", Conv1D weights stored (in, out), causal-mask buffers) loads into nn::GPT
// with the logits of the model it was written from; a checkpoint of other sizes is a clear
// error that leaves the model as it was.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/io/safetensors.h"
#include "nn/gpt_test_support.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using gpt_test::make_gpt;
using gpt_test::tiny_options;

// `model`'s state as Hugging Face writes it: the four projection weights transposed to
// Conv1D's (in, out), each block's causal-mask buffer, and the "transformer." prefix kept or
// dropped.
void write_huggingface_file(const nn::GPT& model, const std::string& path, bool keep_prefix) {
  nn::NamedTensors tensors;
  for (const auto& [name, tensor] : model.state_dict()) {
    bool conv1d = name.ends_with("c_attn.weight") || name.ends_with("c_proj.weight") || name.ends_with("c_fc.weight");
    std::string file_name = keep_prefix || !name.starts_with("transformer.") ? name : name.substr(12);
    tensors.emplace_back(file_name, conv1d ? tensor.t() : tensor);
  }
  int64_t block = model.options().block_size;
  for (int64_t layer = 0; layer < model.options().n_layer; ++layer) {
    std::string prefix = (keep_prefix ? "transformer.h." : "h.") + std::to_string(layer);
    tensors.emplace_back(prefix + ".attn.bias", ones({1, 1, block, block}));
  }
  save_safetensors(path, tensors);
}

}  // namespace

TEST_CASE("a Hugging Face GPT-2 checkpoint loads into nn::GPT with the writer's logits", "[gpt][huggingface]") {
  const bool tie = GENERATE(true, false);
  const bool keep_prefix = GENERATE(true, false);
  INFO("tied " << tie << ", \"transformer.\" kept " << keep_prefix);
  auto written = make_gpt(tiny_options(tie), 1);
  auto loaded = make_gpt(tiny_options(tie), 2);
  const std::string path = gpt_test::temp_safetensors_path("hf-gpt2");
  write_huggingface_file(*written, path, keep_prefix);
  nn::load_huggingface_gpt2(*loaded, path);
  std::filesystem::remove(path);

  Tensor tokens = gpt_test::random_tokens({2, 8}, 50, 3);
  CHECK(mg_test::max_abs_difference((*loaded)(tokens), (*written)(tokens)) == 0.0);
}

TEST_CASE("a Hugging Face checkpoint of other sizes is an error naming the file, and changes nothing",
          "[gpt][huggingface]") {
  auto written = make_gpt(tiny_options(true), 1);
  nn::GPTOptions wider = tiny_options(true);
  wider.n_embd = 32;
  auto model = make_gpt(wider, 2);
  const Tensor before = model->transformer->wte->weight.clone();
  const std::string path = gpt_test::temp_safetensors_path("hf-gpt2-sizes");
  write_huggingface_file(*written, path, false);
  std::string message = mg_test::error_message([&] { nn::load_huggingface_gpt2(*model, path); });
  std::filesystem::remove(path);
  INFO(message);
  CHECK(mg_test::contains(message, "loading the Hugging Face GPT-2 checkpoint '" + path + "'"));
  CHECK(mg_test::contains(message, "Hint: build the GPT with the checkpoint's sizes"));
  CHECK(mg_test::max_abs_difference(model->transformer->wte->weight, before) == 0.0);
}
