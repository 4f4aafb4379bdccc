// tests/nn/test_layers.cpp — the layers, containers, losses and init functions against
// values worked out by hand (or from PyTorch's formulas), and a full forward/backward of
// a small MLP.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/nn.h"

namespace {

using mg::DType;
using mg::Tensor;
using mg::nn::Linear;
using mg::nn::Module;
using mg::nn::ReLU;
using mg::nn::Sequential;

struct Moments {
  double mean = 0, std = 0, max_abs = 0;
};

Moments moments_of(const std::vector<float>& values) {
  Moments result;
  for (float value : values) result.mean += value;
  result.mean /= static_cast<double>(values.size());
  for (float value : values) {
    result.std += (value - result.mean) * (value - result.mean);
    result.max_abs = std::max(result.max_abs, std::abs(static_cast<double>(value)));
  }
  result.std = std::sqrt(result.std / static_cast<double>(values.size() - 1));
  return result;
}

}  // namespace

TEST_CASE("Linear initialises as torch.nn.Linear: uniform within 1/sqrt(fan_in)", "[nn]") {
  mg::Generator generator(123);
  Linear layer(784, 512, true, &generator);
  REQUIRE(layer.weight.sizes() == mg::Shape{512, 784});
  REQUIRE(layer.bias.sizes() == mg::Shape{512});
  double bound = 1.0 / std::sqrt(784.0);

  Moments weight = moments_of(layer.weight.to_vector<float>());
  CHECK(weight.max_abs <= bound);
  CHECK(weight.max_abs > 0.999 * bound);  // the whole range is used: the bound is not smaller
  CHECK(weight.std == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  CHECK(std::abs(weight.mean) < 1e-3);

  Moments bias = moments_of(layer.bias.to_vector<float>());
  CHECK(bias.max_abs <= bound);
  CHECK(bias.max_abs > 0.9 * bound);
}

TEST_CASE("Linear with the same Generator seed builds the same weights", "[nn]") {
  mg::Generator first(5), second(5), other(6);
  Linear a(20, 10, true, &first), b(20, 10, true, &second), c(20, 10, true, &other);
  CHECK(a.weight.to_vector<float>() == b.weight.to_vector<float>());
  CHECK(a.bias.to_vector<float>() == b.bias.to_vector<float>());
  CHECK(a.weight.to_vector<float>() != c.weight.to_vector<float>());
}

TEST_CASE("Linear without bias has an undefined bias and one parameter", "[nn]") {
  auto layer = std::make_shared<Linear>(3, 2, /*has_bias=*/false);
  CHECK_FALSE(layer->bias.defined());
  REQUIRE(layer->named_parameters().size() == 1);
  CHECK(layer->named_parameters()[0].first == "weight");
  CHECK(layer->extra_repr() == "in_features=3, out_features=2, bias=false");
  CHECK(layer->in_features() == 3);
  CHECK(layer->out_features() == 2);
}

TEST_CASE("Linear computes x @ weight^T + bias", "[nn]") {
  Linear layer(3, 2);
  {
    mg::NoGradGuard no_grad;
    layer.weight.copy_(mg::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
    layer.bias.copy_(mg::from_vector<float>({0.5f, -1}, {2}));
  }
  Tensor input = mg::from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 3});
  Tensor output = layer(input);
  REQUIRE(output.sizes() == mg::Shape{2, 2});
  // row 0: (1-3)+0.5, (4-6)-1; row 1: (2+2)+0.5, (8+5)-1
  CHECK(output.to_vector<float>() == std::vector<float>{-1.5f, -3.0f, 4.5f, 12.0f});
}

TEST_CASE("init: fan in and out, fills, and version bumps", "[nn]") {
  namespace init = mg::nn::init;
  Tensor kernel = mg::empty({8, 3, 5, 5});
  auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(kernel);
  CHECK(fan_in == 75);
  CHECK(fan_out == 200);
  CHECK_THROWS_WITH(init::calculate_fan_in_and_fan_out(mg::empty({4})),
                    Catch::Contains("shape [4]") && Catch::Contains("at least 2 dimensions"));

  // A parameter that requires grad: init must write under NoGradGuard.
  Tensor weight = mg::empty({64, 100}, {.requires_grad = true});
  uint64_t version = weight.version();
  init::zeros_(weight);
  CHECK(weight.version() > version);
  CHECK(weight.to_vector<float>() == std::vector<float>(6400, 0.0f));
  init::ones_(weight);
  CHECK(weight.to_vector<float>() == std::vector<float>(6400, 1.0f));
  version = weight.version();
  mg::Generator generator(9);
  init::normal_(weight, 2.0, 0.5, &generator);
  CHECK(weight.version() > version);
  Moments normal = moments_of(weight.to_vector<float>());
  CHECK(normal.mean == Approx(2.0).margin(0.05));
  CHECK(normal.std == Approx(0.5).epsilon(0.05));
  init::uniform_(weight, -3.0, -1.0, &generator);
  Moments uniform = moments_of(weight.to_vector<float>());
  CHECK(uniform.mean == Approx(-2.0).margin(0.05));
  CHECK(uniform.max_abs <= 3.0);
  // kaiming_uniform_ with a = 0 (ReLU gain sqrt(2)): bound sqrt(6 / fan_in).
  init::kaiming_uniform_(weight, 0.0, &generator);
  Moments kaiming = moments_of(weight.to_vector<float>());
  CHECK(kaiming.max_abs <= std::sqrt(6.0 / 100.0));
  CHECK(kaiming.max_abs > 0.95 * std::sqrt(6.0 / 100.0));
}

TEST_CASE("ReLU, GELU and Flatten compute their ops", "[nn]") {
  Tensor input = mg::from_vector<float>({-2, -1, 0, 1}, {2, 2});
  CHECK(ReLU()(input).to_vector<float>() == std::vector<float>{0, 0, 0, 1});
  std::vector<float> gelu = mg::nn::GELU()(input).to_vector<float>();
  // x * Phi(x), the exact (erf) form
  CHECK(gelu[0] == Approx(-0.04550026389635842));
  CHECK(gelu[1] == Approx(-0.15865525393145707));
  CHECK(gelu[2] == 0.0f);
  CHECK(gelu[3] == Approx(0.8413447460685429));

  Tensor images = mg::zeros({5, 1, 28, 28});
  CHECK(mg::nn::Flatten()(images).sizes() == mg::Shape{5, 784});
  CHECK(mg::nn::Flatten(0, 1)(images).sizes() == mg::Shape{5, 28, 28});
}

TEST_CASE("Dropout drops in training and is the identity in eval", "[nn]") {
  auto dropout = std::make_shared<mg::nn::Dropout>(0.25);
  CHECK(dropout->str() == "Dropout(p=0.25)");
  Tensor input = mg::ones({4000});
  std::vector<float> trained = (*dropout)(input).to_vector<float>();
  int64_t dropped = std::count(trained.begin(), trained.end(), 0.0f);
  int64_t kept = std::count_if(trained.begin(), trained.end(),
                               [](float value) { return value == Approx(1.0 / 0.75); });
  CHECK(dropped + kept == 4000);
  CHECK(dropped == Approx(1000).margin(120));  // 4000 * 0.25, about 4.4 standard deviations

  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(4, 4), dropout);
  model->eval();
  CHECK((*dropout)(input).to_vector<float>() == input.to_vector<float>());

  CHECK_THROWS_WITH(mg::nn::Dropout(1.5), Catch::Contains("Dropout(p=1.5)") && Catch::Contains("[0, 1]"));
  CHECK_THROWS(mg::nn::Dropout(-0.1));
}

TEST_CASE("Sequential names, indexes and chains its modules", "[nn]") {
  auto first = std::make_shared<Linear>(3, 4);
  auto second = std::make_shared<Linear>(4, 2);
  Sequential model;
  model.push_back(first);
  model.push_back(std::make_shared<ReLU>());
  model.push_back("head", second);
  CHECK(model.size() == 3);
  CHECK(model[0] == first);
  CHECK(model[2] == second);
  CHECK(model.named_children()[2].first == "head");
  CHECK(model.named_children()[1].first == "1");
  CHECK_THROWS_WITH(model[3], Catch::Contains("index 3 is out of range for a Sequential of 3 module(s)"));
  CHECK_THROWS_WITH(model.push_back("head", std::make_shared<ReLU>()), Catch::Contains("already has"));

  Tensor input = mg::randn({5, 3});
  std::vector<float> chained = model(input).to_vector<float>();
  std::vector<float> by_hand = (*second)(ReLU()((*first)(input))).to_vector<float>();
  CHECK(chained == by_hand);
  CHECK(Sequential()(input).is_same(input));  // empty: the identity, as in PyTorch
}

TEST_CASE("loss modules compute their losses", "[nn]") {
  Tensor logits = mg::from_vector<float>({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor target = mg::from_vector<int64_t>({2, 0}, {2});
  // -log softmax: row 0 at class 2: log(e + e^2 + e^3) - 3; row 1 at class 0: log 3
  double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, row1 = std::log(3.0);
  mg::nn::CrossEntropyLoss cross_entropy;
  CHECK(cross_entropy(logits, target).item() == Approx((row0 + row1) / 2));
  CHECK(cross_entropy.forward(logits, target).item() == Approx((row0 + row1) / 2));
  CHECK_THROWS_WITH(cross_entropy.forward(logits),
                    Catch::StartsWith("CrossEntropyLoss has no single-input forward"));
  mg::nn::CrossEntropyLoss summed({.reduction = mg::Reduction::Sum});
  CHECK(summed(logits, target).item() == Approx(row0 + row1));

  Tensor log_probs = mg::from_vector<float>({-1, -2, -3, -4, -5, -6}, {2, 3});
  mg::nn::NLLLoss nll;
  CHECK(nll(log_probs, target).item() == Approx((3.0 + 4.0) / 2));
  mg::nn::NLLLoss nll_ignoring(mg::Reduction::Mean, /*ignore_index=*/0);
  CHECK(nll_ignoring(log_probs, target).item() == Approx(3.0));

  Tensor prediction = mg::from_vector<float>({1, 2, 3}, {3});
  Tensor expected = mg::from_vector<float>({1, 0, 0}, {3});
  CHECK(mg::nn::MSELoss()(prediction, expected).item() == Approx((4.0 + 9.0) / 3));
  CHECK(mg::nn::MSELoss(mg::Reduction::Sum)(prediction, expected).item() == Approx(13.0));
  CHECK(cross_entropy.str() == "CrossEntropyLoss()");
}

TEST_CASE("an MLP's backward fills every parameter's gradient", "[nn]") {
  mg::Generator generator(11);
  auto model = std::make_shared<Sequential>(
      std::make_shared<mg::nn::Flatten>(), std::make_shared<Linear>(12, 8, true, &generator),
      std::make_shared<ReLU>(), std::make_shared<Linear>(8, 3, true, &generator));
  Tensor input = mg::randn({6, 2, 6}, {}, &generator);
  Tensor target = mg::from_vector<int64_t>({0, 1, 2, 2, 1, 0}, {6});
  Tensor loss = mg::nn::CrossEntropyLoss()((*model)(input), target);
  loss.backward();
  for (const auto& [name, parameter] : model->named_parameters()) {
    INFO(name);
    REQUIRE(parameter.grad().defined());
    CHECK(parameter.grad().sizes() == parameter.sizes());
    CHECK(parameter.grad().dtype() == parameter.dtype());
    CHECK(parameter.grad().memory_category() == mg::MemoryCategory::Gradient);
  }

  // The last bias's gradient is the batch mean of softmax(logits) - one_hot(target).
  std::vector<float> logits;
  {
    mg::NoGradGuard no_grad;
    logits = (*model)(input).to_vector<float>();
  }
  std::vector<double> expected(3, 0.0);
  for (int n = 0; n < 6; ++n) {
    double normaliser = 0;
    for (int c = 0; c < 3; ++c) normaliser += std::exp(static_cast<double>(logits[n * 3 + c]));
    for (int c = 0; c < 3; ++c) {
      double probability = std::exp(static_cast<double>(logits[n * 3 + c])) / normaliser;
      expected[c] += (probability - (target.to_vector<int64_t>()[n] == c ? 1.0 : 0.0)) / 6.0;
    }
  }
  std::vector<float> bias_grad = std::static_pointer_cast<Linear>((*model)[3])->bias.grad().to_vector<float>();
  for (int c = 0; c < 3; ++c) CHECK(bias_grad[c] == Approx(expected[c]).margin(1e-6));
}
