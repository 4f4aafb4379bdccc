// tests/nn/test_kv_cache.cpp — incremental decoding with nn::KVCache: every step's logits
// against a full forward over the whole prefix (batch 2, several steps, one new token or a
// chunk of them, with and without dropout in eval mode), the cache's bytes against the
// formula nn/kv_cache.h gives, clear(), and the errors of misuse.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "autograd/tensor_checks.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/nn/gpt.h"
#include "memgrad/nn/kv_cache.h"
#include "nn/gpt_test_support.h"

using namespace mg;

namespace {

using gpt_test::make_gpt;
using gpt_test::random_tokens;
using gpt_test::tiny_options;
using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

// float32 logits of magnitude ~1: the cached path sums the same products, but over
// differently shaped matmuls, so the last bits may differ (measured: at most 3e-8).
constexpr double kTolerance = 1e-6;

// Feeds `tokens` (B, T) to the cache in chunks of the given lengths and checks each chunk's
// logits against the same positions of one forward over everything up to the chunk's end.
void check_steps_against_full_forward(nn::GPT& model, const Tensor& tokens, const std::vector<int64_t>& chunks) {
  NoGradGuard no_grad;
  nn::KVCache cache(model.options(), tokens.size(0));
  int64_t position = 0;
  for (int64_t chunk : chunks) {
    const Tensor cached_logits = model.forward(narrow(tokens, 1, position, chunk), cache);  // (B, chunk, V)
    position += chunk;
    const Tensor full_logits = model(narrow(tokens, 1, 0, position));                      // (B, position, V)
    INFO("positions " << position - chunk << " .. " << position - 1);
    REQUIRE(cached_logits.sizes() == Shape{tokens.size(0), chunk, model.options().vocab_size});
    CHECK(max_abs_difference(cached_logits, narrow(full_logits, 1, position - chunk, chunk)) < kTolerance);
    CHECK(cache.length() == position);
  }
}

}  // namespace

TEST_CASE("KVCache: each step's logits are those of a full forward over the prefix", "[nn][gpt][kv_cache]") {
  const bool with_dropout = GENERATE(false, true);
  nn::GPTOptions options = tiny_options();
  options.dropout = with_dropout ? 0.3 : 0.0;  // eval mode: no effect on either path
  auto model = make_gpt(options, 7);
  model->eval();
  const Tensor tokens = random_tokens({2, options.block_size}, options.vocab_size, 11);  // (2, 8)
  INFO("dropout " << options.dropout);
  SECTION("a prompt, then one token at a time up to block_size") {
    check_steps_against_full_forward(*model, tokens, {3, 1, 1, 1, 1, 1});
  }
  SECTION("one token at a time from the start") {
    check_steps_against_full_forward(*model, tokens, {1, 1, 1, 1, 1, 1, 1, 1});
  }
  SECTION("chunks of several tokens after cached ones (the masked path)") {
    check_steps_against_full_forward(*model, tokens, {2, 3, 1, 2});
  }
}

TEST_CASE("KVCache: bytes are 2 * n_layer * B * block_size * n_embd elements, allocated once",
          "[nn][gpt][kv_cache]") {
  const nn::GPTOptions options = tiny_options();  // 2 layers, 16 wide, block 8
  auto model = make_gpt(options, 3);
  model->eval();
  NoGradGuard no_grad;
  nn::KVCache cache(model->options(), 2);
  CHECK(cache.bytes() == 0);  // nothing until the first forward
  CHECK(cache.capacity() == 8);
  const int64_t activation_before = memory::snapshot().category(MemoryCategory::Activation).current;
  model->forward(random_tokens({2, 1}, options.vocab_size, 1), cache);
  const int64_t expected = 2 * 2 * 2 * 8 * 16 * 4;  // keys and values, layers, B, block, C, float32
  CHECK(cache.bytes() == expected);
  // Tagged ACTIVATION (nothing else is: no graph under NoGradGuard); the allocator may round
  // each of the 4 buffers up to its block size.
  const int64_t activation = memory::snapshot().category(MemoryCategory::Activation).current - activation_before;
  CHECK(activation >= expected);
  CHECK(activation < expected + 4 * 1024);
  model->forward(random_tokens({2, 7}, options.vocab_size, 2), cache);
  CHECK(cache.bytes() == expected);  // full now, and never reallocated
  CHECK(cache.length() == 8);
}

TEST_CASE("KVCache: clear() starts again at position 0", "[nn][gpt][kv_cache]") {
  const nn::GPTOptions options = tiny_options();
  auto model = make_gpt(options, 5);
  model->eval();
  NoGradGuard no_grad;
  nn::KVCache cache(model->options(), 2);
  model->forward(random_tokens({2, 6}, options.vocab_size, 1), cache);
  cache.clear();
  CHECK(cache.length() == 0);
  const Tensor tokens = random_tokens({2, 4}, options.vocab_size, 2);
  CHECK(max_abs_difference(model->forward(tokens, cache), (*model)(tokens)) < kTolerance);
  CHECK(cache.length() == 4);
}

TEST_CASE("KVCache: misuse is an mg::Error that leaves the cache as it was", "[nn][gpt][kv_cache]") {
  const nn::GPTOptions options = tiny_options();
  auto model = make_gpt(options, 9);
  model->eval();
  nn::KVCache cache(model->options(), 2);
  const Tensor two = random_tokens({2, 2}, options.vocab_size, 1);

  SECTION("with gradients enabled") {
    CHECK(contains(error_message([&] { model->forward(two, cache); }), "NoGradGuard"));
    CHECK(cache.length() == 0);
  }
  NoGradGuard no_grad;
  model->forward(random_tokens({2, 6}, options.vocab_size, 2), cache);
  SECTION("past block_size: says how many are cached and to clear()") {
    const std::string message = error_message([&] { model->forward(random_tokens({2, 3}, options.vocab_size, 3), cache); });
    CHECK(contains(message, "after 6 cached ones"));
    CHECK(contains(message, "clear()"));
    CHECK(cache.length() == 6);
    model->forward(two, cache);  // exactly full still works
    CHECK(cache.length() == 8);
    CHECK(contains(error_message([&] { model->forward(random_tokens({2, 1}, options.vocab_size, 4), cache); }),
                   "block_size=8"));
  }
  SECTION("another batch size") {
    CHECK(contains(error_message([&] { model->forward(random_tokens({3, 1}, options.vocab_size, 5), cache); }),
                   "KV cache of batch 2"));
    CHECK(cache.length() == 6);
  }
  SECTION("a cache built for another model") {
    nn::GPTOptions deeper = options;
    deeper.n_layer = 3;
    nn::KVCache other(deeper, 2);
    CHECK(contains(error_message([&] { model->forward(two, other); }), "KV cache of 3 layers"));
  }
}
