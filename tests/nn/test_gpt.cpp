// tests/nn/test_gpt.cpp — the GPT-2 model: Hugging Face's parameter names and GPT-2's
// parameter counts (tied and untied), nanoGPT's initialisation, the tied head's gradient, a
// state_dict through safetensors, checkpointing (same logits and gradients in float64,
// fewer ACTIVATION bytes), a gradcheck of a tiny model, causality, dropout, and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/io/safetensors.h"
#include "nn/gpt_test_support.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using gpt_test::make_gpt;
using gpt_test::random_tokens;
using gpt_test::tiny_options;
using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

// Next-token cross entropy of the logits (B, T, V) against targets (B, T).
Tensor language_model_loss(const Tensor& logits, const Tensor& targets) {
  int64_t rows = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {rows, logits.size(2)}), reshape(targets, {rows}));
}

std::vector<std::string> names_of(const nn::NamedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& entry : tensors) names.push_back(entry.first);
  return names;
}

Tensor parameter(const nn::Module& model, const std::string& name) {
  for (const auto& [parameter_name, tensor] : model.named_parameters()) {
    if (parameter_name == name) return tensor;
  }
  FAIL("no parameter " << name);
  return Tensor();
}

double standard_deviation(const Tensor& tensor) {
  std::vector<double> values = tensor.to(DType::Float64).to_vector<double>();
  double mean = 0, square = 0;
  for (double value : values) mean += value / static_cast<double>(values.size());
  for (double value : values) square += (value - mean) * (value - mean) / static_cast<double>(values.size());
  return std::sqrt(square);
}

}  // namespace

TEST_CASE("GPT's parameters carry Hugging Face GPT-2's names, the tied table once", "[gpt]") {
  auto model = make_gpt(tiny_options(), 1);
  std::vector<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (const std::string layer : {"0", "1"}) {
    for (const std::string tensor : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      expected.push_back("transformer.h." + layer + "." + tensor);
    }
  }
  expected.push_back("transformer.ln_f.weight");
  expected.push_back("transformer.ln_f.bias");
  CHECK(names_of(model->named_parameters()) == expected);
  CHECK(names_of(model->state_dict()) == expected);  // no lm_head.weight: it is wte's tensor
  CHECK(model->lm_head->weight.is_same(model->transformer->wte->weight));
  CHECK(model->lm_head->tied());

  // Per layer: ln_1 2*16, c_attn 16*48 + 48, attn.c_proj 16*16 + 16, ln_2 2*16,
  // c_fc 16*64 + 64, mlp.c_proj 64*16 + 16 = 32 + 816 + 272 + 32 + 1088 + 1040 = 3280.
  // wte 50*16 = 800, wpe 8*16 = 128, ln_f 32: 800 + 128 + 2*3280 + 32 = 7520.
  CHECK(model->num_parameters() == 7520);
  CHECK(model->num_parameters(/*exclude_position_embeddings=*/true) == 7520 - 128);

  auto untied = make_gpt(tiny_options(/*tie_embeddings=*/false), 1);
  expected.push_back("lm_head.weight");
  CHECK(names_of(untied->named_parameters()) == expected);
  CHECK(names_of(untied->state_dict()) == expected);
  CHECK_FALSE(untied->lm_head->tied());
  CHECK(untied->lm_head->weight.sizes() == Shape{50, 16});
  CHECK(untied->num_parameters() == 7520 + 800);
}

TEST_CASE("the GPT-2 presets have GPT-2's sizes, and gpt2() holds 124,439,808 parameters", "[gpt]") {
  nn::GPTOptions medium = nn::GPTOptions::gpt2_medium(), large = nn::GPTOptions::gpt2_large();
  CHECK((medium.n_layer == 24 && medium.n_head == 16 && medium.n_embd == 1024 && medium.vocab_size == 50257));
  CHECK((large.n_layer == 36 && large.n_head == 20 && large.n_embd == 1280 && large.block_size == 1024));
  const nn::GPTOptions xl = nn::GPTOptions::gpt2_xl();
  CHECK((xl.n_layer == 48 && xl.n_head == 25 && xl.n_embd == 1600 && xl.vocab_size == 50257));

  nn::GPTOptions options = nn::GPTOptions::gpt2();
  CHECK((options.n_layer == 12 && options.n_head == 12 && options.n_embd == 768));
  CHECK((options.vocab_size == 50257 && options.block_size == 1024 && options.tie_embeddings));
  // wte 50257*768 = 38,597,376; wpe 1024*768 = 786,432; per block: ln_1 1,536,
  // c_attn 768*2304 + 2304 = 1,771,776, attn.c_proj 768*768 + 768 = 590,592, ln_2 1,536,
  // c_fc 768*3072 + 3072 = 2,362,368, mlp.c_proj 3072*768 + 768 = 2,360,064: 7,087,872,
  // times 12 = 85,054,464; ln_f 1,536. Sum: 124,439,808, Hugging Face's "gpt2" count.
  nn::GPT model(options, nullptr);
  CHECK(model.num_parameters() == 124439808);
  CHECK(model.num_parameters(true) == 124439808 - 786432);  // nanoGPT's "123.65M"
  CHECK(model.named_parameters().size() == 2 + 12 * 12 + 2);
  // 6 N + 12 L T C: 746,638,848 + 12 * 12 * 1024 * 768 = 746,638,848 + 113,246,208.
  CHECK(model.training_flops_per_token() == 859885056.0);
}

TEST_CASE("GPT initialises as nanoGPT, every value from the given generator", "[gpt]") {
  nn::GPTOptions options = tiny_options();
  options.n_embd = 64;
  options.n_layer = 2;
  uint64_t global_offset = default_generator().state().offset;
  auto model = make_gpt(options, 2);
  CHECK(default_generator().state().offset == global_offset);  // the global generator is untouched

  CHECK(standard_deviation(parameter(*model, "transformer.h.0.attn.c_attn.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(standard_deviation(parameter(*model, "transformer.h.1.mlp.c_fc.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(standard_deviation(parameter(*model, "transformer.wte.weight")) == Approx(0.02).epsilon(0.05));
  // The residual projections: 0.02 / sqrt(2 * n_layer) = 0.01.
  CHECK(standard_deviation(parameter(*model, "transformer.h.0.attn.c_proj.weight")) == Approx(0.01).epsilon(0.05));
  CHECK(standard_deviation(parameter(*model, "transformer.h.1.mlp.c_proj.weight")) == Approx(0.01).epsilon(0.05));
  for (const std::string name : {"transformer.h.0.attn.c_attn.bias", "transformer.h.1.mlp.c_proj.bias",
                                 "transformer.ln_f.bias"}) {
    INFO(name);
    CHECK(standard_deviation(parameter(*model, name)) == 0.0);
    CHECK(parameter(*model, name).to_vector<float>().front() == 0.0f);
  }
  CHECK(parameter(*model, "transformer.h.1.ln_2.weight").to_vector<float>() == std::vector<float>(64, 1.0f));

  // The same seed builds the same model.
  auto again = make_gpt(options, 2);
  nn::NamedTensors first = model->state_dict(), second = again->state_dict();
  for (size_t i = 0; i < first.size(); ++i) CHECK(max_abs_difference(first[i].second, second[i].second) == 0.0);
}

TEST_CASE("the tied head's gradient flows into the token table", "[gpt]") {
  // The untied model with lm_head.weight set to the token table computes the same logits;
  // the tied table's gradient is the sum of its two uses.
  auto tied = make_gpt(tiny_options(), 3);
  auto untied = make_gpt(tiny_options(false), 3);
  untied->load_state_dict(tied->state_dict(), /*strict=*/false);
  untied->lm_head->weight.detach().copy_(tied->transformer->wte->weight.detach());
  Tensor tokens = random_tokens({2, 8}, 50, 4), targets = random_tokens({2, 8}, 50, 5);

  Tensor tied_logits = (*tied)(tokens), untied_logits = (*untied)(tokens);
  REQUIRE(tied_logits.sizes() == Shape{2, 8, 50});
  CHECK(max_abs_difference(tied_logits, untied_logits) == 0.0);
  language_model_loss(tied_logits, targets).backward();
  language_model_loss(untied_logits, targets).backward();

  Tensor embedding_grad = untied->transformer->wte->weight.grad(), head_grad = untied->lm_head->weight.grad();
  CHECK(standard_deviation(head_grad) > 0.0);
  CHECK(max_abs_difference(tied->transformer->wte->weight.grad(), add(embedding_grad, head_grad)) < 1e-6);
}

TEST_CASE("GPT::loss equals the cross entropy of forward's logits, with the same gradients, tied or not",
          "[gpt]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    auto fused = make_gpt(tiny_options(tied), 6);
    auto plain = make_gpt(tiny_options(tied), 6);
    Tensor tokens = random_tokens({2, 8}, 50, 7), targets = random_tokens({2, 8}, 50, 8);
    Tensor loss = fused->loss(tokens, targets);
    Tensor expected = language_model_loss((*plain)(tokens), targets);
    CHECK(loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-6));
    loss.backward();
    expected.backward();
    std::vector<Tensor> fused_parameters = fused->parameters(), plain_parameters = plain->parameters();
    REQUIRE(fused_parameters.size() == plain_parameters.size());
    for (size_t i = 0; i < fused_parameters.size(); ++i) {
      INFO("parameter " << i);
      CHECK(max_abs_difference(fused_parameters[i].grad(), plain_parameters[i].grad()) < 1e-6);
    }
  }
  auto model = make_gpt(tiny_options(), 6);
  CHECK(contains(error_message([&] { model->loss(random_tokens({2, 8}, 50, 7), random_tokens({2, 7}, 50, 8)); }),
                 "do not match tokens of shape [2, 8]"));
}

TEST_CASE("a GPT's state_dict goes through safetensors into a fresh model with identical logits", "[gpt]") {
  const std::string path = gpt_test::temp_safetensors_path("mg_gpt");
  Tensor tokens = random_tokens({3, 7}, 50, 6);
  for (bool tie : {true, false}) {
    INFO("tie_embeddings=" << tie);
    auto saved = make_gpt(tiny_options(tie), 7);
    auto restored = make_gpt(tiny_options(tie), 8);
    REQUIRE(max_abs_difference((*saved)(tokens), (*restored)(tokens)) > 1e-3);
    nn::save(*saved, path);
    std::vector<std::string> keys = names_of(load_safetensors(path));
    CHECK(std::count(keys.begin(), keys.end(), "lm_head.weight") == (tie ? 0 : 1));
    nn::load(*restored, path);  // strict: a tied file without lm_head.weight fits exactly
    CHECK(max_abs_difference((*saved)(tokens), (*restored)(tokens)) == 0.0);
    if (tie) CHECK(restored->lm_head->weight.is_same(restored->transformer->wte->weight));
  }
  std::filesystem::remove(path);
}

TEST_CASE("checkpointed blocks give the same logits and gradients in float64 (with dropout too), with fewer "
          "ACTIVATION bytes",
          "[gpt]") {
  nn::GPTOptions options = tiny_options();
  options.n_layer = 4;
  options.n_embd = 32;
  options.block_size = 16;
  options.attention = AttentionBackend::Math;
  Tensor tokens = random_tokens({4, 16}, 50, 9), targets = random_tokens({4, 16}, 50, 10);

  auto run = [&](bool checkpoint, DType dtype, int64_t* activation_peak) {
    options.checkpoint = checkpoint ? nn::BlockCheckpoint::Whole : nn::BlockCheckpoint::None;
    auto model = make_gpt(options, 11);
    model->to(dtype);
    int64_t before = memory::snapshot().category(MemoryCategory::Activation).current;
    memory::reset_peak_stats();
    Tensor logits = (*model)(tokens);
    language_model_loss(logits, targets).backward();
    *activation_peak = memory::snapshot().category(MemoryCategory::Activation).peak - before;
    return std::make_pair(logits.detach(), model);
  };
  int64_t plain_peak = 0, checked_peak = 0;
  auto [plain_logits, plain] = run(false, DType::Float64, &plain_peak);
  auto [checked_logits, checked] = run(true, DType::Float64, &checked_peak);
  CHECK(max_abs_difference(plain_logits, checked_logits) == 0.0);
  nn::NamedTensors plain_parameters = plain->named_parameters(), checked_parameters = checked->named_parameters();
  REQUIRE(plain_parameters.size() == checked_parameters.size());
  for (size_t i = 0; i < plain_parameters.size(); ++i) {
    INFO("gradient of " << plain_parameters[i].first);
    CHECK(max_abs_difference(plain_parameters[i].second.grad(), checked_parameters[i].second.grad()) < 1e-12);
  }
  INFO("ACTIVATION peak: " << plain_peak << " bytes unchecked, " << checked_peak << " checkpointed");
  CHECK(checked_peak * 2 < plain_peak);

  // With dropout the recompute replays the forward's masks (attention's and the residuals').
  options.dropout = 0.2;
  manual_seed(21);
  auto [plain_dropped, plain_with_dropout] = run(false, DType::Float64, &plain_peak);
  manual_seed(21);
  auto [checked_dropped, checked_with_dropout] = run(true, DType::Float64, &checked_peak);
  CHECK(max_abs_difference(plain_dropped, plain_logits) > 1e-3);
  CHECK(max_abs_difference(plain_dropped, checked_dropped) == 0.0);
  CHECK(max_abs_difference(parameter(*plain_with_dropout, "transformer.h.0.attn.c_attn.weight").grad(),
                           parameter(*checked_with_dropout, "transformer.h.0.attn.c_attn.weight").grad()) < 1e-12);
  CHECK(max_abs_difference(parameter(*plain_with_dropout, "transformer.wte.weight").grad(),
                           parameter(*checked_with_dropout, "transformer.wte.weight").grad()) < 1e-12);
}

TEST_CASE("a tiny GPT's gradients match finite differences in float64", "[gpt]") {
  auto model = make_gpt({.n_layer = 1, .n_head = 2, .n_embd = 4, .block_size = 4, .vocab_size = 7,
                         .attention = AttentionBackend::Math},
                        12);
  model->to(DType::Float64);
  // Bigger weights than GPT-2's 0.02, so every path carries a visible share of the output.
  Generator generator(13);
  for (const Tensor& tensor : model->parameters()) nn::init::normal_(tensor, 0.0, 0.5, &generator);
  Tensor tokens = from_vector<int64_t>({1, 6, 3, 0, 2, 2}, {2, 3});
  Tensor output_weights = randn({2, 3, 7}, {.dtype = DType::Float64}, &generator);

  std::vector<Tensor> checked = {parameter(*model, "transformer.wte.weight"),  // embedding and tied head
                                 parameter(*model, "transformer.wpe.weight"),
                                 parameter(*model, "transformer.h.0.attn.c_attn.weight"),
                                 parameter(*model, "transformer.h.0.ln_1.weight"),
                                 parameter(*model, "transformer.h.0.mlp.c_fc.bias"),
                                 parameter(*model, "transformer.ln_f.bias")};
  GradcheckResult result = gradcheck(
      [&](const std::vector<Tensor>&) { return sum(mul((*model)(tokens), output_weights)); }, checked);
  INFO(result.message);
  CHECK(result.passed);
}

TEST_CASE("GPT is causal: a later token never changes earlier logits", "[gpt]") {
  auto model = make_gpt(tiny_options(), 14);
  Tensor tokens = random_tokens({1, 8}, 50, 15);
  Tensor changed = tokens.clone();
  changed.select(1, 5).fill_(static_cast<double>((tokens.to_vector<int64_t>()[5] + 1) % 50));
  Tensor before = (*model)(tokens), after = (*model)(changed);
  CHECK(max_abs_difference(narrow(before, 1, 0, 5), narrow(after, 1, 0, 5)) == 0.0);
  CHECK(max_abs_difference(narrow(before, 1, 5, 3), narrow(after, 1, 5, 3)) > 1e-4);
}

TEST_CASE("GPT drops out in training and not in evaluation", "[gpt]") {
  nn::GPTOptions options = tiny_options();
  options.dropout = 0.3;
  auto model = make_gpt(options, 16);
  options.dropout = 0.0;
  auto without_dropout = make_gpt(options, 16);
  Tensor tokens = random_tokens({2, 8}, 50, 17);

  model->eval();
  Tensor evaluated = (*model)(tokens);
  CHECK(max_abs_difference(evaluated, (*without_dropout)(tokens)) == 0.0);
  model->train();
  Tensor trained = (*model)(tokens), trained_again = (*model)(tokens);
  CHECK(max_abs_difference(trained, evaluated) > 1e-3);
  CHECK(max_abs_difference(trained, trained_again) > 1e-3);
}

TEST_CASE("GPT rejects bad options and bad tokens, naming the rule", "[gpt]") {
  nn::GPTOptions options = tiny_options();
  options.n_head = 3;
  CHECK(contains(error_message([&] { nn::GPT model(options); }), "n_embd=16 is not divisible by n_head=3"));
  options = tiny_options();
  options.block_size = 0;
  CHECK(contains(error_message([&] { nn::GPT model(options); }), "must all be positive"));

  auto model = make_gpt(tiny_options(), 18);
  std::string too_long = error_message([&] { (*model)(random_tokens({1, 9}, 50, 19)); });
  CHECK(contains(too_long, "T=9"));
  CHECK(contains(too_long, "block_size=8"));
  CHECK(contains(error_message([&] { (*model)(zeros({1, 4})); }), "token ids must be integers"));
  CHECK(contains(error_message([&] { (*model)(random_tokens({8}, 50, 20)); }), "shape (B, T)"));
  std::string bad_id = error_message([&] { (*model)(from_vector<int64_t>({3, 50}, {1, 2})); });
  CHECK(contains(bad_id, "index 50"));
  CHECK(contains(bad_id, "out of range"));
}

TEST_CASE("GPT prints its tree with Hugging Face's names", "[gpt]") {
  auto model = make_gpt(tiny_options(), 21);
  std::string text = model->str();
  CHECK(contains(text, "(wte): Embedding(50, 16)"));
  CHECK(contains(text, "(ln_f): LayerNorm((16,), eps=1e-05, elementwise_affine=True)"));
  CHECK(contains(text, "(gelu): GELU(approximate='tanh')"));
  CHECK(contains(text, "(lm_head): LMHead(in_features=16, out_features=50, tied=true)"));
}
