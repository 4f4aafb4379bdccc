// tests/autograd/test_topk_multinomial.cpp — what sampling from a language model needs:
// topk (values and order against hand-computed rows, ties, NaN, any dim, gradcheck of the
// values) and multinomial (the statistics of 100k draws, no repeats without replacement,
// zero weights never drawn, reproducibility from a seed, errors).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/topk.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;

namespace {

std::vector<double> values(const Tensor& x) { return x.to(DType::Float64).to_vector<double>(); }
std::vector<int64_t> indices(const Tensor& x) { return x.contiguous().to_vector<int64_t>(); }

}  // namespace

// ---- topk ----

TEST_CASE("topk returns each row's k largest or smallest, sorted, with their indices", "[topk]") {
  Tensor x = from_vector<float>({3, 1, 4, 1, 5, 9, 2, 6,
                                 -1, 7, 0, 8, -3, 2, 2, 5}, {2, 8});
  auto [top_values, top_indices] = topk(x, 3);
  CHECK(top_values.sizes() == Shape{2, 3});
  CHECK(top_indices.dtype() == DType::Int64);
  CHECK(values(top_values) == std::vector<double>{9, 6, 5, 8, 7, 5});
  CHECK(indices(top_indices) == std::vector<int64_t>{5, 7, 4, 3, 1, 7});

  auto [low_values, low_indices] = topk(x, 2, -1, /*largest=*/false);
  CHECK(values(low_values) == std::vector<double>{1, 1, -3, -1});
  CHECK(indices(low_indices) == std::vector<int64_t>{1, 3, 4, 0});  // equal values: lower index first

  // k = n sorts the whole row; k = 0 gives empty results.
  auto [all_values, all_indices] = topk(x.select(0, 1), 8);
  CHECK(values(all_values) == std::vector<double>{8, 7, 5, 2, 2, 0, -1, -3});
  CHECK(indices(all_indices) == std::vector<int64_t>{3, 1, 7, 5, 6, 2, 0, 4});
  CHECK(std::get<0>(topk(x, 0)).sizes() == Shape{2, 0});
}

TEST_CASE("topk orders ties by index and NaN above every number", "[topk]") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  Tensor ties = from_vector<double>({2, 5, 5, 2, 5}, {5});
  CHECK(indices(std::get<1>(topk(ties, 4))) == std::vector<int64_t>{1, 2, 4, 0});
  CHECK(indices(std::get<1>(topk(ties, 3, 0, false))) == std::vector<int64_t>{0, 3, 1});

  Tensor with_nan = from_vector<double>({1, nan, inf, -inf, nan}, {5});
  CHECK(indices(std::get<1>(topk(with_nan, 3))) == std::vector<int64_t>{1, 4, 2});
  CHECK(indices(std::get<1>(topk(with_nan, 5, 0, false))) == std::vector<int64_t>{3, 0, 2, 1, 4});
}

TEST_CASE("topk along a middle dim and in 16-bit types matches the last-dim result", "[topk]") {
  Generator generator(3);
  Tensor x = randn({3, 7, 4}, {}, &generator);
  auto [middle_values, middle_indices] = topk(x, 2, 1);
  CHECK(middle_values.sizes() == Shape{3, 2, 4});
  auto [last_values, last_indices] = topk(x.transpose(1, 2), 2, -1);  // (3, 4, 2)
  CHECK(values(middle_values) == values(last_values.transpose(1, 2)));
  CHECK(indices(middle_indices) == indices(last_indices.transpose(1, 2)));

  for (DType dtype : {DType::Float16, DType::BFloat16, DType::Int64}) {
    Tensor small = from_vector<double>({0.5, -2, 3, 3, 1}, {1, 5}).to(dtype);
    auto [typed_values, typed_indices] = topk(small, 3);
    CHECK(typed_values.dtype() == dtype);
    CHECK(values(typed_values) == std::vector<double>{3, 3, 1});
    CHECK(indices(typed_indices) == std::vector<int64_t>{2, 3, 4});
  }
}

TEST_CASE("topk's values pass their gradient back to the chosen entries", "[topk]") {
  Generator generator(4);
  Tensor x = randn({3, 6}, {.dtype = DType::Float64, .requires_grad = true}, &generator);
  auto check = [&](const std::function<Tensor(const std::vector<Tensor>&)>& fn, const Tensor& input) {
    GradcheckResult result = gradcheck(fn, {input});
    INFO(result.message);
    CHECK(result.passed);
  };
  check([](const std::vector<Tensor>& in) { return std::get<0>(topk(in[0], 2)); }, x);
  check([](const std::vector<Tensor>& in) { return mul(std::get<0>(topk(in[0], 2, 0, false)), 3.0); }, x);
  Tensor cube = randn({2, 5, 3}, {.dtype = DType::Float64, .requires_grad = true}, &generator);
  check([](const std::vector<Tensor>& in) { return std::get<0>(topk(in[0], 3, 1)); }, cube);

  Tensor row = from_vector<double>({1, 4, 2, 8}, {4});
  row.requires_grad_();
  sum(mul(std::get<0>(topk(row, 2)), from_vector<double>({10, 100}, {2}))).backward();
  CHECK(values(row.grad()) == std::vector<double>{0, 100, 0, 10});
}

TEST_CASE("topk rejects k outside the dimension", "[topk]") {
  Tensor x = zeros({2, 5});
  std::string too_large = error_message([&] { topk(x, 6); });
  CHECK(contains(too_large, "k = 6 is out of range"));
  CHECK(contains(too_large, "of size 5"));
  CHECK(contains(error_message([&] { topk(x, -1); }), "out of range"));
  CHECK(contains(error_message([&] { topk(scalar_tensor(1.0), 1); }), "0-d"));
}

// ---- multinomial ----

TEST_CASE("multinomial with replacement draws each category in proportion to its weight", "[multinomial]") {
  // Unnormalised weights: probabilities 0.1, 0, 0.2, 0.3, 0.4.
  Tensor weights = from_vector<float>({1, 0, 2, 3, 4}, {5});
  Generator generator(11);
  const int64_t draws = 100000;
  Tensor samples = multinomial(weights, draws, /*replacement=*/true, &generator);
  REQUIRE(samples.sizes() == Shape{draws});
  REQUIRE(samples.dtype() == DType::Int64);
  std::vector<int64_t> counts(5, 0);
  int64_t out_of_range = 0;
  for (int64_t sample : samples.to_vector<int64_t>()) {
    if (sample < 0 || sample >= 5) {
      ++out_of_range;
    } else {
      ++counts[sample];
    }
  }
  REQUIRE(out_of_range == 0);
  std::vector<double> expected = {0.1, 0.0, 0.2, 0.3, 0.4};
  for (int j = 0; j < 5; ++j) {
    INFO("category " << j);
    CHECK(std::abs(static_cast<double>(counts[j]) / draws - expected[j]) < 0.01);
  }
  CHECK(counts[1] == 0);
}

TEST_CASE("multinomial without replacement never repeats and takes zero weights last", "[multinomial]") {
  Generator generator(12);
  Tensor weights = from_vector<double>({0.5, 0, 0.1, 0, 0.4, 0.2,
                                        0, 1, 0, 0, 0, 0}, {2, 6});
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> rows = multinomial(weights, 6, false, &generator).to_vector<int64_t>();
    std::set<int64_t> first(rows.begin(), rows.begin() + 6), second(rows.begin() + 6, rows.end());
    CHECK(first.size() == 6);
    CHECK(second.size() == 6);
    // Row 0's four positive categories come first, then the zeros by index.
    CHECK(std::set<int64_t>(rows.begin(), rows.begin() + 4) == std::set<int64_t>{0, 2, 4, 5});
    CHECK(rows[4] == 1);
    CHECK(rows[5] == 3);
    CHECK(rows[6] == 1);  // row 1's only positive category
  }
  // The first draw of sampling without replacement follows the weights too.
  std::vector<int64_t> counts(3, 0);
  Tensor three = from_vector<double>({0.2, 0.5, 0.3}, {1, 3}).expand({20000, 3});
  for (int64_t first_draw : multinomial(three, 2, false, &generator).select(1, 0).contiguous().to_vector<int64_t>()) {
    ++counts[first_draw];
  }
  CHECK(std::abs(counts[0] / 20000.0 - 0.2) < 0.015);
  CHECK(std::abs(counts[1] / 20000.0 - 0.5) < 0.015);
}

TEST_CASE("multinomial draws the same samples from the same seed and reserves its blocks", "[multinomial]") {
  Generator first(99), second(99);
  Tensor probs = rand({4, 50}, {}, &first);
  rand({4, 50}, {}, &second);
  Tensor a = multinomial(probs, 10, true, &first);
  Tensor b = multinomial(probs, 10, true, &second);
  CHECK(indices(a) == indices(b));
  // With replacement 4 * 10 blocks were reserved; without, 4 * 50.
  CHECK(first.state().offset == second.state().offset);
  uint64_t before = first.state().offset;
  multinomial(probs, 3, false, &first);
  CHECK(first.state().offset == before + 4 * 50);
  CHECK(indices(multinomial(probs, 3, false, &first)) != indices(multinomial(probs, 3, false, &first)));
}

TEST_CASE("multinomial rejects weights that are not a distribution and impossible requests", "[multinomial]") {
  Tensor good = from_vector<float>({0.2f, 0.8f}, {2});
  CHECK(contains(error_message([&] { multinomial(from_vector<float>({0.5f, -0.1f}, {2}), 1); }),
                 "non-negative and finite"));
  CHECK(contains(error_message([&] {
                   multinomial(from_vector<float>({0.5f, std::numeric_limits<float>::infinity()}, {2}), 1);
                 }),
                 "non-negative and finite"));
  CHECK(contains(error_message([&] { multinomial(zeros({2, 3}), 1); }), "sum to 0"));
  std::string too_many = error_message([&] { multinomial(good, 3, false); });
  CHECK(contains(too_many, "cannot draw 3 samples from 2 categories without replacement"));
  CHECK(contains(error_message([&] { multinomial(zeros({1, 2, 2}), 1); }), "1-D (n) or 2-D"));
  CHECK(contains(error_message([&] { multinomial(good, 0); }), "num_samples must be positive"));
  CHECK(contains(error_message([&] { multinomial(from_vector<int64_t>({1, 2}, {2}), 1); }), "must be floating"));
}
