// nn/gpt_decoder.cpp — feeding a growing sequence to a GPT through its KV cache, and
// starting again from half a window when the cache is full.
#include "memgrad/nn/gpt_decoder.h"

#include <algorithm>

#include "memgrad/autograd/shape.h"
#include "memgrad/core/error.h"

namespace mg::nn {

GPTDecoder::GPTDecoder(GPT& model, int64_t batch) : model_(model), cache_(model.options(), batch) {}

Tensor GPTDecoder::next_logits(const Tensor& tokens) {
  MG_CHECK(tokens.defined() && tokens.dim() == 2, "GPTDecoder: expected the sequence so far as token ids of shape ",
           "(B, T), got ", tokens.defined() ? tokens.sizes() : Shape{}, ". Hint: a single sequence is ",
           "tokens.unsqueeze(0)");
  const int64_t total = tokens.size(1), cached_end = start_ + cache_.length();
  MG_CHECK(total > cached_end, "GPTDecoder: the sequence has ", total, " tokens but ", cached_end,
           " were read already; each call needs the sequence so far with at least one new token at the end");
  int64_t fresh = total - cached_end;
  if (cache_.length() + fresh > cache_.capacity()) {
    const int64_t keep = std::min(total, std::max(cache_.capacity() / 2, std::min(fresh, cache_.capacity())));
    cache_.clear();
    start_ = total - keep;
    fresh = keep;
  }
  const Tensor logits = model_.forward(narrow(tokens, 1, total - fresh, fresh), cache_);  // (B, fresh, V)
  return select(logits, 1, fresh - 1);                                                     // (B, V)
}

}  // namespace mg::nn
