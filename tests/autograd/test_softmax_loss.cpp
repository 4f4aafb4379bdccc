// tests/autograd/test_softmax_loss.cpp — softmax, log_softmax, nll_loss, cross_entropy
// (with ignore_index and label smoothing) and mse_loss: values against hand-computed
// numbers and PyTorch's formulas, gradients against finite differences, error messages,
// and the bytes each keeps for backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

Tensor labels(const std::vector<int64_t>& values) { return from_vector<int64_t>(values); }

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  // NOTE: a 0-d result is checked as shape [1]: gradcheck builds its seed with
  // from_vector(values, output.sizes()), which reads empty sizes as 1-D.
  auto at_least_1d = [&](const std::vector<Tensor>& in) {
    Tensor out = fn(in);
    return out.dim() == 0 ? reshape(out, {1}) : out;
  };
  GradcheckResult result = gradcheck(at_least_1d, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

// PyTorch's cross_entropy with label smoothing, per sample, from row-major (N, C) logits:
// (1 - eps) * -log_p[target] + eps * mean_c(-log_p[c]); 0 for an ignored sample.
std::vector<double> reference_cross_entropy(const std::vector<double>& logits, int64_t classes,
                                            const std::vector<int64_t>& target, double smoothing,
                                            int64_t ignore_index) {
  std::vector<double> losses;
  for (size_t n = 0; n < target.size(); ++n) {
    const double* row = logits.data() + n * classes;
    double max_value = row[0];
    for (int64_t c = 1; c < classes; ++c) max_value = std::max(max_value, row[c]);
    double log_total = 0;
    for (int64_t c = 0; c < classes; ++c) log_total += std::exp(row[c] - max_value);
    log_total = std::log(log_total) + max_value;
    if (target[n] == ignore_index) {
      losses.push_back(0.0);
      continue;
    }
    double mean_negative_log_p = 0;
    for (int64_t c = 0; c < classes; ++c) mean_negative_log_p += (log_total - row[c]) / classes;
    losses.push_back((1 - smoothing) * (log_total - row[target[n]]) + smoothing * mean_negative_log_p);
  }
  return losses;
}

}  // namespace

// ---- softmax ----

TEST_CASE("softmax and log_softmax of [1, 2, 3]", "[loss]") {
  Tensor x = from_vector<double>({1, 2, 3});
  std::vector<double> probabilities = softmax(x, 0).to_vector<double>();
  std::vector<double> log_probabilities = x.log_softmax(-1).to_vector<double>();
  std::vector<double> expected{0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  for (size_t i = 0; i < 3; ++i) {
    CHECK(probabilities[i] == Approx(expected[i]).epsilon(1e-12));
    CHECK(log_probabilities[i] == Approx(std::log(expected[i])).epsilon(1e-12));
  }
  // Rows of a non-contiguous input still sum to one along the chosen dim.
  Tensor columns = transpose(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), 0, 1).softmax(1);  // (3, 2)
  std::vector<float> values = columns.to_vector<float>();
  for (size_t row = 0; row < 3; ++row) CHECK(values[2 * row] + values[2 * row + 1] == Approx(1.0f));
  CHECK(values[0] == Approx(1.0 / (1.0 + std::exp(3.0))));  // softmax([1, 4])[0]
  CHECK(softmax(scalar_tensor(5.0), 0).item() == 1.0);
}

TEST_CASE("softmax and log_softmax gradients match finite differences along every dim", "[loss]") {
  for (int64_t dim : {0, 1, -1}) {
    for (bool log : {false, true}) {
      INFO("dim " << dim << (log ? " log_softmax" : " softmax"));
      check_gradients([&](const std::vector<Tensor>& in) { return log ? log_softmax(in[0], dim) : softmax(in[0], dim); },
                      {leaf({2, 3, 4}, 1 + dim)});
    }
  }
  check_gradients([](const std::vector<Tensor>& in) { return softmax(transpose(in[0], 0, 2), 1); }, {leaf({2, 3, 4}, 5)});
}

TEST_CASE("softmax saves its output: exactly its bytes are ACTIVATION until backward", "[loss]") {
  Tensor x = randn({8, 16}, {.requires_grad = true});
  int64_t before = category_bytes(MemoryCategory::Activation);
  Tensor y = softmax(x, 1);
  CHECK(category_bytes(MemoryCategory::Activation) - before == static_cast<int64_t>(y.nbytes()));
  CHECK(y.memory_category() == MemoryCategory::Activation);
  CHECK(x.memory_category() == MemoryCategory::Temporary);
  y.backward(ones_like(y));
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  CHECK(y.memory_category() == MemoryCategory::Temporary);
  // Each row of softmax sums to 1, so the gradient of the sum is zero.
  for (float value : x.grad().to_vector<float>()) CHECK(value == Approx(0.0f).margin(1e-6));
}

TEST_CASE("softmax rejects integer tensors and bad dims", "[loss]") {
  CHECK_THROWS_WITH(softmax(labels({1, 2}), 0), Catch::Contains("softmax") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(log_softmax(empty({2, 3}), 2), Catch::Contains("out of range"));
}

// ---- nll_loss ----

TEST_CASE("nll_loss reduces over the counted targets", "[loss]") {
  Tensor log_probs = from_vector<double>({-1.0, -2.0, -3.0, -0.5, -1.5, -2.5}, {2, 3});
  CHECK(nll_loss(log_probs, labels({0, 2})).item() == 1.75);
  CHECK(nll_loss(log_probs, labels({0, 2}), Reduction::Sum).item() == 3.5);
  CHECK(nll_loss(log_probs, labels({0, 2}), Reduction::None).to_vector<double>() == std::vector<double>{1.0, 2.5});
  // The ignored sample adds nothing and is not counted by the mean.
  CHECK(nll_loss(log_probs, labels({1, -100})).item() == 2.0);
  CHECK(nll_loss(log_probs, labels({1, 2}), Reduction::Mean, 1).item() == 2.5);
  CHECK(nll_loss(log_probs, labels({1, 2}), Reduction::None, 1).to_vector<double>() == std::vector<double>{0.0, 2.5});
  // No counted target: 0 / 0, as in PyTorch.
  CHECK(std::isnan(nll_loss(log_probs, labels({-100, -100})).item()));
}

TEST_CASE("nll_loss gradients match finite differences, with an ignore_index", "[loss]") {
  Tensor target = labels({0, 2, 1, 2, 3});
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    INFO("reduction " << static_cast<int>(reduction));
    check_gradients([&](const std::vector<Tensor>& in) { return nll_loss(in[0], target, reduction, 2); },
                    {leaf({5, 4}, 10)});
  }
}

TEST_CASE("nll_loss saves only the targets (and the count for the mean)", "[loss]") {
  Tensor log_probs = randn({32, 10}, {.requires_grad = true});
  Tensor target = randint(0, 10, {32});
  int64_t before = category_bytes(MemoryCategory::Activation);
  Tensor summed = nll_loss(log_probs, target, Reduction::Sum);
  CHECK(category_bytes(MemoryCategory::Activation) - before == 32 * 8);
  Tensor averaged = nll_loss(log_probs, target, Reduction::Mean);
  CHECK(category_bytes(MemoryCategory::Activation) - before == 32 * 8 + 4);  // target saved once, plus the count
  summed.backward();
  averaged.backward();
  CHECK(category_bytes(MemoryCategory::Activation) == before);
}

// ---- cross_entropy ----

TEST_CASE("cross_entropy of known logits", "[loss]") {
  Tensor logits = from_vector<double>({1, 2, 3}, {1, 3});
  CHECK(cross_entropy(logits, labels({2})).item() == Approx(0.40760596444438).epsilon(1e-12));
  // Label smoothing 0.1: 0.9 * nll + 0.1 * mean over classes of -log_softmax.
  double log_total = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double mean_negative_log_p = ((log_total - 1) + (log_total - 2) + (log_total - 3)) / 3;
  double expected = 0.9 * 0.40760596444438 + 0.1 * mean_negative_log_p;
  CHECK(cross_entropy(logits, labels({2}), {.label_smoothing = 0.1}).item() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("cross_entropy matches PyTorch's formula for every reduction", "[loss]") {
  Generator generator(42);
  Tensor logits = randn({6, 5}, {.dtype = DType::Float64}, &generator);
  std::vector<int64_t> target{4, 0, -100, 2, 2, 1};
  for (double smoothing : {0.0, 0.1}) {
    INFO("label_smoothing " << smoothing);
    std::vector<double> per_sample = reference_cross_entropy(logits.to_vector<double>(), 5, target, smoothing, -100);
    double total = 0;
    for (double loss : per_sample) total += loss;
    std::vector<double> none = cross_entropy(logits, labels(target), {.reduction = Reduction::None, .label_smoothing = smoothing})
                                   .to_vector<double>();
    REQUIRE(none.size() == per_sample.size());
    for (size_t n = 0; n < none.size(); ++n) CHECK(none[n] == Approx(per_sample[n]).epsilon(1e-12));
    CHECK(cross_entropy(logits, labels(target), {.reduction = Reduction::Sum, .label_smoothing = smoothing}).item() ==
          Approx(total).epsilon(1e-12));
    CHECK(cross_entropy(logits, labels(target), {.label_smoothing = smoothing}).item() ==
          Approx(total / 5).epsilon(1e-12));  // 5 counted targets
  }
}

TEST_CASE("cross_entropy gradients match finite differences", "[loss]") {
  Tensor target = labels({1, 0, 3, 3});
  for (double smoothing : {0.0, 0.1}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      INFO("label_smoothing " << smoothing << ", reduction " << static_cast<int>(reduction));
      check_gradients(
          [&](const std::vector<Tensor>& in) {
            return cross_entropy(in[0], target, {.reduction = reduction, .label_smoothing = smoothing, .ignore_index = 0});
          },
          {leaf({4, 5}, 20)});
    }
  }
}

TEST_CASE("cross_entropy gradients match finite differences for transposed logits and all ignored", "[loss]") {
  Tensor target = labels({2, -100, 0});
  for (double smoothing : {0.0, 0.3, 1.0}) {
    INFO("label_smoothing " << smoothing);
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return cross_entropy(transpose(in[0], 0, 1), target, {.label_smoothing = smoothing});
        },
        {leaf({4, 3}, 21)});
  }
  // No counted target: the mean is 0 / 0 (NaN, as in PyTorch), the sum 0 with zero gradient.
  Tensor logits = leaf({2, 3}, 22);
  CHECK(std::isnan(cross_entropy(logits, labels({-100, -100})).item()));
  Tensor summed = cross_entropy(logits, labels({-100, -100}), {.reduction = Reduction::Sum});
  CHECK(summed.item() == 0.0);
  summed.backward();
  for (double value : logits.grad().to_vector<double>()) CHECK(value == 0.0);
}

TEST_CASE("cross_entropy without smoothing equals nll_loss of log_softmax, value and gradient", "[loss]") {
  Generator generator(23);
  Tensor logits = randn({16, 9}, {.requires_grad = true}, &generator);
  Tensor target = randint(0, 9, {16}, {.dtype = DType::Int64}, &generator);
  Tensor fused = cross_entropy(logits, target);
  fused.backward();
  Tensor fused_grad = logits.grad();
  logits.set_grad(Tensor());
  Tensor composite = nll_loss(log_softmax(logits, 1), target);
  composite.backward();
  CHECK(fused.item() == composite.item());  // the same per-sample arithmetic, bit for bit
  std::vector<float> expected = logits.grad().to_vector<float>(), got = fused_grad.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-7));
}

TEST_CASE("cross_entropy saves the logits and one float per row, not a log_softmax copy", "[loss]") {
  const int64_t batch = 32, classes = 10;
  Tensor logits = randn({batch, classes}, {.requires_grad = true});
  Tensor target = randint(0, classes, {batch});
  int64_t activation_before = category_bytes(MemoryCategory::Activation);
  int64_t temporary_before = category_bytes(MemoryCategory::Temporary);
  Tensor loss = cross_entropy(logits, target, {.label_smoothing = 0.1});
  // Saved: the logits and targets (re-tagged), the float32 log-sum-exp and the count of the
  // mean. log_softmax + nll_loss kept an (N, C) log_softmax output besides the logits.
  CHECK(category_bytes(MemoryCategory::Activation) - activation_before ==
        batch * classes * 4 + batch * 8 + batch * 4 + 4);
  CHECK(logits.memory_category() == MemoryCategory::Activation);
  // Nothing else is left allocated but the 0-d loss.
  CHECK(category_bytes(MemoryCategory::Temporary) - temporary_before == 4 - batch * classes * 4 - batch * 8);
  loss.backward();
  CHECK(category_bytes(MemoryCategory::Activation) == activation_before);
  CHECK(logits.memory_category() == MemoryCategory::Temporary);
}

TEST_CASE("cross_entropy names what is wrong with its arguments", "[loss]") {
  Tensor logits = empty({4, 10});
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<float>({1, 2, 3, 4})),
                    "cross_entropy: target must hold int64 class indices, got float32; hint: "
                    "labels.to(mg::DType::Int64)");
  CHECK_THROWS_WITH(cross_entropy(logits, labels({1, 2, 3})), Catch::Contains("[3]") && Catch::Contains("[4, 10]"));
  CHECK_THROWS_WITH(cross_entropy(empty({10}), labels({1})), Catch::Contains("(N, C)") && Catch::Contains("[10]"));
  CHECK_THROWS_WITH(cross_entropy(zeros({2, 3}), labels({0, 3})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(nll_loss(zeros({2, 3}), labels({0, -1})), Catch::Contains("out of range"));
}

// ---- mse_loss ----

TEST_CASE("mse_loss values and gradients", "[loss]") {
  Tensor input = from_vector<double>({1.0, 2.0, 3.0});
  Tensor target = from_vector<double>({1.5, 2.0, 5.0});
  CHECK(mse_loss(input, target).item() == Approx(4.25 / 3).epsilon(1e-12));
  CHECK(mse_loss(input, target, Reduction::Sum).item() == Approx(4.25).epsilon(1e-12));
  CHECK(mse_loss(input, target, Reduction::None).to_vector<double>() == std::vector<double>{0.25, 0.0, 4.0});
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    check_gradients([&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], reduction); },
                    {leaf({3, 4}, 30), leaf({3, 4}, 31)});
  }
  CHECK_THROWS_WITH(mse_loss(empty({4, 1}), empty({4})), Catch::Contains("[4, 1]") && Catch::Contains("[4]"));
}
