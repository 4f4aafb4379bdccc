// examples/common/gpt_sizes.cpp — a GPT preset's sizes, replaced one by one from the
// command line.
#include "examples/common/gpt_sizes.h"

#include <string>

namespace examples {

void GPTSizeFlags::add_to(FlagHandlers& flags, bool with_vocab) {
  auto size = [](const char* flag, std::optional<int64_t>& target) {
    return [flag, &target](const std::string& value) { target = parse_count(flag, value); };
  };
  flags["--layers"] = size("--layers", layers);
  flags["--heads"] = size("--heads", heads);
  flags["--embd"] = size("--embd", embd);
  flags["--block"] = size("--block", block);
  if (with_vocab) flags["--vocab"] = size("--vocab", vocab);
}

mg::nn::GPTOptions GPTSizeFlags::apply(mg::nn::GPTOptions preset) const {
  preset.n_layer = layers.value_or(preset.n_layer);
  preset.n_head = heads.value_or(preset.n_head);
  preset.n_embd = embd.value_or(preset.n_embd);
  preset.block_size = block.value_or(preset.block_size);
  preset.vocab_size = vocab.value_or(preset.vocab_size);
  return preset;
}

}  // namespace examples
