// tests/fuzz/tiny_gpt.h — the gpt example's run, shrunk so that its checkpoint is a seed of
// a few KB: what make_fuzz_corpus saves and fuzz_checkpoint resumes into.
#pragma once

#include <cstdint>

#include "memgrad/nn/gpt_options.h"

namespace fuzz {

inline mg::nn::GPTOptions tiny_gpt_options() {
  return {.n_layer = 1, .n_head = 1, .n_embd = 4, .block_size = 4, .vocab_size = 16};
}

// The run's length, which a resumed run must share with the saved one.
constexpr int64_t kTinyRunSteps = 10;
// Its schedule's warm-up (a WarmupCosineLR, as the gpt program's).
constexpr int64_t kTinyWarmupSteps = 2;

}  // namespace fuzz
