// tests/nn/gpt_test_support.h — what the GPT tests share: a tiny model's options, a model
// seeded for reproducible weights, random token ids, and a per-process temp file path.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/gpt.h"

namespace gpt_test {

// 2 layers, 2 heads, 16 wide, vocab 50, 8 positions.
inline mg::nn::GPTOptions tiny_options(bool tie_embeddings = true) {
  return {.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab_size = 50,
          .tie_embeddings = tie_embeddings};
}

// A GPT whose weights are drawn from a generator seeded with `seed`.
inline std::shared_ptr<mg::nn::GPT> make_gpt(const mg::nn::GPTOptions& options, uint64_t seed) {
  mg::Generator generator(seed);
  return std::make_shared<mg::nn::GPT>(options, &generator);
}

// int64 token ids of `sizes`, uniform in [0, vocab_size).
inline mg::Tensor random_tokens(const mg::Shape& sizes, int64_t vocab_size, uint64_t seed) {
  mg::Generator generator(seed);
  return mg::randint(0, vocab_size, sizes, {.dtype = mg::DType::Int64}, &generator);
}

// <temp dir>/<name>-<pid>.safetensors: parallel test processes never share a file.
inline std::string temp_safetensors_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

}  // namespace gpt_test
