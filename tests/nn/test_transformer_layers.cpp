// tests/nn/test_transformer_layers.cpp — the transformer's layers: Embedding (torch's
// initialisation, the padding row), LayerNorm (the op with the module's parameters), GELU's
// tanh form, and CausalSelfAttention (heads split as views of one projection, causality,
// dropout only in training).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/layer_norm.h"
#include "memgrad/autograd/masked_fill.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

// Mean and standard deviation of a tensor's elements.
std::pair<double, double> mean_and_std(const Tensor& tensor) {
  std::vector<double> values = tensor.to(DType::Float64).to_vector<double>();
  double mean = 0, square = 0;
  for (double value : values) mean += value;
  mean /= static_cast<double>(values.size());
  for (double value : values) square += (value - mean) * (value - mean);
  return {mean, std::sqrt(square / static_cast<double>(values.size()))};
}

nn::GPTOptions small_attention_options() {
  nn::GPTOptions options;
  options.n_embd = 8;
  options.n_head = 2;
  options.attention = AttentionBackend::Math;
  return options;
}

}  // namespace

// ---- Embedding ----

TEST_CASE("Embedding starts normal(0, 1) as torch's and looks rows up", "[transformer_layers]") {
  Generator generator(1);
  nn::Embedding embedding(100, 50, {}, &generator);
  REQUIRE(embedding.weight.sizes() == Shape{100, 50});
  CHECK(embedding.named_parameters().size() == 1);
  CHECK(embedding.named_parameters()[0].first == "weight");
  auto [mean, std] = mean_and_std(embedding.weight);
  CHECK(std::abs(mean) < 0.03);      // 5000 draws: the mean's std is 0.014
  CHECK(std::abs(std - 1.0) < 0.03);
  CHECK(embedding.extra_repr() == "100, 50");

  Tensor indices = from_vector<int64_t>({3, 0, 3, 99, 7, 1}, {2, 3});
  Tensor rows = embedding(indices);
  REQUIRE(rows.sizes() == Shape{2, 3, 50});
  CHECK(max_abs_difference(rows.select(0, 1).select(0, 0), embedding.weight.select(0, 99)) == 0.0);
  CHECK(max_abs_difference(rows.select(0, 0).select(0, 2), embedding.weight.select(0, 3)) == 0.0);

  CHECK(contains(error_message([&] { embedding(from_vector<int64_t>({100}, {1})); }), "out of range"));
  CHECK(contains(error_message([] { nn::Embedding(0, 4); }), "num_embeddings"));
}

TEST_CASE("Embedding's padding row starts at zero and gets no gradient", "[transformer_layers]") {
  Generator generator(2);
  nn::Embedding embedding(6, 4, 2, &generator);
  CHECK(embedding.padding_idx() == 2);
  CHECK(embedding.extra_repr() == "6, 4, padding_idx=2");
  CHECK(embedding.weight.select(0, 2).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(mean_and_std(embedding.weight.select(0, 1)).second > 0.0);  // the other rows are drawn

  Tensor indices = from_vector<int64_t>({2, 1, 2, 5}, {4});
  Tensor weights = randn({4, 4}, {}, &generator);
  sum(mul(embedding(indices), weights)).backward();
  Tensor grad = embedding.weight.grad();
  CHECK(grad.select(0, 2).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(max_abs_difference(grad.select(0, 1), weights.select(0, 1)) == 0.0);
  CHECK(max_abs_difference(grad.select(0, 5), weights.select(0, 3)) == 0.0);

  // A negative padding_idx counts from the end, as in torch.
  nn::Embedding from_end(6, 4, -1, &generator);
  CHECK(from_end.padding_idx() == 5);
  CHECK(from_end.weight.select(0, 5).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(contains(error_message([] { nn::Embedding(6, 4, 6); }), "padding_idx must be within [-6, 6)"));
}

// ---- LayerNorm ----

TEST_CASE("LayerNorm is layer_norm with its weight and bias", "[transformer_layers]") {
  nn::LayerNorm norm(Shape{6}, 1e-3);
  CHECK(norm.weight.to_vector<float>() == std::vector<float>(6, 1.0f));
  CHECK(norm.bias.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(norm.extra_repr() == "(6,), eps=0.001, elementwise_affine=True");
  nn::NamedTensors parameters = norm.named_parameters();
  REQUIRE(parameters.size() == 2);
  CHECK(parameters[0].first == "weight");
  CHECK(parameters[1].first == "bias");

  Generator generator(3);
  nn::init::normal_(norm.weight, 1.0, 0.5, &generator);
  nn::init::normal_(norm.bias, 0.0, 0.5, &generator);
  Tensor input = randn({2, 3, 6}, {}, &generator).mul_(3.0).add_(2.0);
  Tensor output = norm(input);
  CHECK(max_abs_difference(output, layer_norm(input, {6}, norm.weight, norm.bias, 1e-3)) == 0.0);
  // By hand for one row: (x - mean) / sqrt(var + eps) * weight + bias, biased variance.
  std::vector<float> row = input.select(0, 1).select(0, 2).to_vector<float>();
  std::vector<float> weight = norm.weight.to_vector<float>(), bias = norm.bias.to_vector<float>();
  double mean = 0, variance = 0;
  for (float value : row) mean += value / 6.0;
  for (float value : row) variance += (value - mean) * (value - mean) / 6.0;
  std::vector<float> got = output.select(0, 1).select(0, 2).to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    CHECK(got[i] == Approx((row[i] - mean) / std::sqrt(variance + 1e-3) * weight[i] + bias[i]).margin(1e-5));
  }
}

TEST_CASE("LayerNorm without affine or without bias registers what torch registers", "[transformer_layers]") {
  nn::LayerNorm plain(Shape{2, 3}, 1e-5, /*elementwise_affine=*/false);
  CHECK(plain.named_parameters().empty());
  CHECK(plain.extra_repr() == "(2, 3), eps=1e-05, elementwise_affine=False");
  Generator generator(4);
  Tensor input = randn({4, 2, 3}, {}, &generator);
  CHECK(max_abs_difference(plain(input), layer_norm(input, {2, 3})) == 0.0);

  nn::LayerNorm no_bias(Shape{3}, 1e-5, true, /*bias=*/false);
  REQUIRE(no_bias.named_parameters().size() == 1);
  CHECK(no_bias.named_parameters()[0].first == "weight");
  CHECK_FALSE(no_bias.bias.defined());

  CHECK(contains(error_message([] { nn::LayerNorm(Shape{0}); }), "normalized_shape"));
  CHECK(contains(error_message([] { nn::LayerNorm(Shape{4}, 0.0); }), "eps"));
}

// ---- GELU ----

TEST_CASE("GELU's approximate option selects the tanh form", "[transformer_layers]") {
  Tensor input = from_vector<float>({-2.0f, -0.5f, 0.0f, 0.7f, 3.0f}, {5});
  nn::GELU exact, tanh_form(GeluApproximate::Tanh);
  CHECK(exact.extra_repr() == "approximate='none'");
  CHECK(tanh_form.extra_repr() == "approximate='tanh'");
  std::vector<float> got = tanh_form(input).to_vector<float>();
  std::vector<float> values = input.to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    double x = values[i];
    double expected = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    CHECK(got[i] == Approx(expected).margin(1e-6));
  }
  CHECK(max_abs_difference(exact(input), gelu(input)) == 0.0);
  // The two forms differ by up to ~2e-4 around |x| = 2: different functions, not one.
  CHECK(max_abs_difference(exact(input), tanh_form(input)) > 1e-5);
}

// ---- CausalSelfAttention ----

TEST_CASE("CausalSelfAttention computes per-head causal softmax attention of one packed projection",
          "[transformer_layers]") {
  Generator generator(5);
  nn::CausalSelfAttention attention(small_attention_options(), &generator);
  nn::NamedTensors parameters = attention.named_parameters();
  REQUIRE(parameters.size() == 4);
  CHECK(parameters[0].first == "c_attn.weight");
  CHECK(attention.c_attn->weight.sizes() == Shape{24, 8});
  CHECK(parameters[2].first == "c_proj.weight");
  CHECK(attention.c_proj->weight.sizes() == Shape{8, 8});
  CHECK(attention.extra_repr() == "n_head=2, backend=math");

  const int64_t batch = 2, sequence = 5, heads = 2, head_dim = 4;
  Tensor input = randn({batch, sequence, 8}, {}, &generator);
  Tensor output = attention(input);
  REQUIRE(output.sizes() == Shape{batch, sequence, 8});

  // The reference: q, k, v are columns [0, 8), [8, 16), [16, 24) of the projection, head h
  // their columns [4h, 4h + 4); masked scores get -inf before the softmax.
  Tensor qkv = linear(input, attention.c_attn->weight, attention.c_attn->bias);  // (B, T, 24)
  Tensor causal_mask = triu(ones({sequence, sequence}), 1).to(DType::Bool);      // true above the diagonal
  std::vector<Tensor> head_outputs;
  for (int64_t head = 0; head < heads; ++head) {
    Tensor q = narrow(qkv, 2, head * head_dim, head_dim);
    Tensor k = narrow(qkv, 2, 8 + head * head_dim, head_dim);
    Tensor v = narrow(qkv, 2, 16 + head * head_dim, head_dim);
    Tensor scores = div(matmul(q, transpose(k, 1, 2)), std::sqrt(static_cast<double>(head_dim)));
    head_outputs.push_back(matmul(softmax(masked_fill(scores, causal_mask, -INFINITY), -1), v));
  }
  Tensor expected = linear(cat(head_outputs, 2), attention.c_proj->weight, attention.c_proj->bias);
  CHECK(max_abs_difference(output, expected) < 1e-5);
}

TEST_CASE("CausalSelfAttention is causal: a later position never changes an earlier output",
          "[transformer_layers]") {
  Generator generator(6);
  nn::CausalSelfAttention attention(small_attention_options(), &generator);
  Tensor input = randn({1, 6, 8}, {}, &generator);
  Tensor changed = input.clone();
  changed.select(1, 4).copy_(randn({1, 8}, {}, &generator));  // position t + 1 = 4
  Tensor before = attention(input), after = attention(changed);
  CHECK(max_abs_difference(narrow(before, 1, 0, 4), narrow(after, 1, 0, 4)) == 0.0);
  CHECK(max_abs_difference(narrow(before, 1, 4, 2), narrow(after, 1, 4, 2)) > 1e-3);
}

TEST_CASE("CausalSelfAttention drops out in training only", "[transformer_layers]") {
  nn::GPTOptions options = small_attention_options();
  options.dropout = 0.5;
  Generator generator(7);
  nn::CausalSelfAttention attention(options, &generator);
  Tensor input = randn({2, 5, 8}, {}, &generator);

  attention.eval();
  Tensor first = attention(input), second = attention(input);
  CHECK(max_abs_difference(first, second) == 0.0);
  options.dropout = 0.0;
  Generator same(7);
  nn::CausalSelfAttention without_dropout(options, &same);
  CHECK(max_abs_difference(first, without_dropout(input)) == 0.0);

  attention.train();
  Tensor trained = attention(input), trained_again = attention(input);
  CHECK(max_abs_difference(trained, first) > 1e-3);
  CHECK(max_abs_difference(trained, trained_again) > 1e-3);  // a fresh mask each call
}

TEST_CASE("CausalSelfAttention rejects a width the heads do not divide and a wrong input",
          "[transformer_layers]") {
  nn::GPTOptions options = small_attention_options();
  options.n_embd = 10;
  options.n_head = 4;
  CHECK(contains(error_message([&] { nn::CausalSelfAttention attention(options); }),
                 "n_embd=10 is not divisible by n_head=4"));
  options.n_head = 0;
  CHECK(contains(error_message([&] { nn::CausalSelfAttention attention(options); }), "must be positive"));
  nn::CausalSelfAttention attention(small_attention_options());
  CHECK(contains(error_message([&] { attention(zeros({2, 5, 6})); }), "expected an input of shape (B, T, 8)"));
}

// ---- MLP and Block ----

TEST_CASE("MLP and Block compose their layers as GPT-2's", "[transformer_layers]") {
  nn::GPTOptions options = small_attention_options();
  Generator generator(8);
  nn::Block block(options, &generator);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : block.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                                          "mlp.c_proj.bias"});
  CHECK(block.mlp->c_fc->weight.sizes() == Shape{32, 8});
  CHECK(block.mlp->gelu->approximate() == GeluApproximate::Tanh);

  Tensor input = randn({2, 3, 8}, {}, &generator);
  Tensor hidden = input + (*block.attn)((*block.ln_1)(input));
  Tensor mlp = linear(gelu(linear((*block.ln_2)(hidden), block.mlp->c_fc->weight, block.mlp->c_fc->bias),
                           GeluApproximate::Tanh),
                      block.mlp->c_proj->weight, block.mlp->c_proj->bias);
  CHECK(max_abs_difference(block(input), hidden + mlp) < 1e-6);

  options.bias = false;
  nn::Block no_bias(options);
  CHECK(no_bias.named_parameters().size() == 6);  // four Linear weights, two LayerNorm weights
}

TEST_CASE("Blocks chained with their residual adds deferred give forward's values and gradients, bit for bit",
          "[transformer_layers]") {
  nn::GPTOptions options = small_attention_options();
  Generator generator(9);
  nn::Block first(options, &generator), second(options, &generator);
  first.to(DType::Float64);
  second.to(DType::Float64);
  const Tensor input = converted_copy(randn({2, 3, 8}, {}, &generator), DType::Float64, Device::cpu());
  const Tensor weights = converted_copy(randn({2, 3, 8}, {}, &generator), DType::Float64, Device::cpu());

  auto run = [&](bool deferred) {
    for (nn::Block* block : {&first, &second}) block->zero_grad();
    Tensor x = input.detach().requires_grad_();
    Tensor output;
    if (deferred) {
      // The second block's ln_1 adds the first block's MLP output; the caller adds the last.
      const nn::DeferredResidual middle = first.forward_deferred({.stream = x});
      CHECK(middle.pending.defined());
      const nn::DeferredResidual last = second.forward_deferred(middle);
      output = last.stream + last.pending;
    } else {
      output = second(first(x));
    }
    sum(mul(output, weights)).backward();
    std::vector<Tensor> results{output.detach(), x.grad()};
    for (nn::Block* block : {&first, &second}) {
      for (const auto& [name, parameter] : block->named_parameters()) results.push_back(contiguous_copy(parameter.grad()));
    }
    return results;
  };
  const std::vector<Tensor> chained = run(false), deferred = run(true);
  REQUIRE(chained.size() == deferred.size());
  for (size_t i = 0; i < chained.size(); ++i) {
    INFO("result " << i << " (0: output, 1: the input's gradient, then the parameters' gradients)");
    CHECK(max_abs_difference(chained[i], deferred[i]) == 0.0);
  }
}
