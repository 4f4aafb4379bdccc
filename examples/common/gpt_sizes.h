// examples/common/gpt_sizes.h — the size flags of the programs that build a GPT (the gpt
// example, interop's gpt_logits): a preset gives every size, then --layers, --heads,
// --embd, --block and (where the vocabulary is not fixed) --vocab replace single ones,
// whatever their order on the line.
#pragma once

#include <cstdint>
#include <optional>

#include "examples/common/cli.h"
#include <memgrad/nn/gpt_options.h>

namespace examples {

struct GPTSizeFlags {
  std::optional<int64_t> layers, heads, embd, block, vocab;

  // Adds the handlers of --layers, --heads, --embd, --block and, with `with_vocab`, --vocab
  // (each a count of at least 1) to `flags`; they write into this object, which must
  // outlive the parsing.
  void add_to(FlagHandlers& flags, bool with_vocab);

  // `preset` with the sizes given on the command line in place of its own.
  mg::nn::GPTOptions apply(mg::nn::GPTOptions preset) const;
};

}  // namespace examples
