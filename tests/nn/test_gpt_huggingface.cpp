// tests/nn/test_gpt_huggingface.cpp — a Hugging Face GPT-2 checkpoint (keys with or without
// "transformer.", Conv1D weights stored (in, out), causal-mask buffers) loads into nn::GPT
// with the logits of the model it was written from; a checkpoint of other sizes is a clear
// error that leaves the model as it was.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "autograd/tensor_checks.h"
#include "core/factory.h"
#include "core/safetensors.h"
#include "nn/nn.h"

using namespace mg;

namespace {

nn::GPTOptions tiny_options(bool tie_embeddings) {
  nn::GPTOptions options;
  options.n_layer = 2;
  options.n_head = 2;
  options.n_embd = 16;
  options.block_size = 8;
  options.vocab_size = 50;
  options.tie_embeddings = tie_embeddings;
  return options;
}

std::shared_ptr<nn::GPT> make_gpt(const nn::GPTOptions& options, uint64_t seed) {
  Generator generator(seed);
  return std::make_shared<nn::GPT>(options, &generator);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".safetensors")).string();
}

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
  const std::string path = temp_path("hf-gpt2");
  write_huggingface_file(*written, path, keep_prefix);
  nn::load_huggingface_gpt2(*loaded, path);
  std::filesystem::remove(path);

  Generator generator(3);
  Tensor tokens = randint(0, 50, {2, 8}, {.dtype = DType::Int64}, &generator);
  CHECK(mg_test::max_abs_difference((*loaded)(tokens), (*written)(tokens)) == 0.0);
}

TEST_CASE("a Hugging Face checkpoint of other sizes is an error naming the file, and changes nothing",
          "[gpt][huggingface]") {
  auto written = make_gpt(tiny_options(true), 1);
  nn::GPTOptions wider = tiny_options(true);
  wider.n_embd = 32;
  auto model = make_gpt(wider, 2);
  const Tensor before = model->transformer->wte->weight.clone();
  const std::string path = temp_path("hf-gpt2-sizes");
  write_huggingface_file(*written, path, false);
  std::string message = mg_test::error_message([&] { nn::load_huggingface_gpt2(*model, path); });
  std::filesystem::remove(path);
  INFO(message);
  CHECK(mg_test::contains(message, "loading the Hugging Face GPT-2 checkpoint '" + path + "'"));
  CHECK(mg_test::contains(message, "Hint: build the GPT with the checkpoint's sizes"));
  CHECK(mg_test::max_abs_difference(model->transformer->wte->weight, before) == 0.0);
}
