// tests/nn/test_gpt_decoder.cpp — nn::GPTDecoder: the next token's logits through the KV
// cache against a full forward over the tokens context_start() names, past several fills
// of the window (batch 2), where the window restarts (nn/gpt_decoder.h), a prompt longer
// than the window, and a call without a new token.
#include <catch2/catch.hpp>

#include <cstdint>

#include "autograd/tensor_checks.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/nn/gpt_decoder.h"
#include "nn/gpt_test_support.h"

using namespace mg;

namespace {

using gpt_test::make_gpt;
using gpt_test::random_tokens;
using gpt_test::tiny_options;
using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

// The last position's logits (B, V) of one forward over tokens[:, start:end].
Tensor full_forward_logits(nn::GPT& model, const Tensor& tokens, int64_t start, int64_t end) {
  return select(model(narrow(tokens, 1, start, end - start)), 1, end - start - 1);
}

}  // namespace

TEST_CASE("GPTDecoder: logits equal a full forward over the context it names, past the window",
          "[nn][gpt][kv_cache]") {
  const nn::GPTOptions options = tiny_options();  // block_size 8
  auto model = make_gpt(options, 21);
  model->eval();
  NoGradGuard no_grad;
  const Tensor tokens = random_tokens({2, 20}, options.vocab_size, 4);
  nn::GPTDecoder decoder(*model, 2);
  // A prompt of 3, one token at a time to 16, then a chunk of 3, then one more.
  for (int64_t end : {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20}) {
    const Tensor logits = decoder.next_logits(narrow(tokens, 1, 0, end));
    const int64_t start = decoder.context_start();
    INFO("tokens " << start << " .. " << end - 1);
    CHECK(max_abs_difference(logits, full_forward_logits(*model, tokens, start, end)) < 1e-6);
    // All tokens up to 8; then, each time the cache is full, the last half window (4
    // tokens) again: 5..8 at 9 (cached up to 13), 10..13 at 14, and at the chunk 16..18
    // (6 cached + 3 > 8) the last 4, 15..18.
    const int64_t expected_start = end <= 8 ? 0 : end <= 13 ? 5 : end <= 16 ? 10 : 15;
    CHECK(start == expected_start);
    CHECK(decoder.cache().length() == end - start);
  }
}

TEST_CASE("GPTDecoder: a prompt longer than the window keeps its last block_size tokens", "[nn][gpt][kv_cache]") {
  const nn::GPTOptions options = tiny_options();
  auto model = make_gpt(options, 22);
  model->eval();
  NoGradGuard no_grad;
  const Tensor tokens = random_tokens({2, 20}, options.vocab_size, 5);
  nn::GPTDecoder decoder(*model, 2);
  const Tensor logits = decoder.next_logits(tokens);
  CHECK(decoder.context_start() == 12);
  CHECK(max_abs_difference(logits, full_forward_logits(*model, tokens, 12, 20)) < 1e-6);
  CHECK(contains(error_message([&] { decoder.next_logits(tokens); }), "at least one new token"));
}
