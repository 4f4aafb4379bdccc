// tests/autograd/test_pool.cpp — max_pool2d, avg_pool2d and adaptive_avg_pool2d: values
// against hand-computed small examples (padding, ceil_mode, count_include_pad, overlapping
// windows), gradients against finite differences, error messages, and the bytes max
// pooling keeps for backward (one per output).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/pool.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

// Distinct values (a permutation of 0..n-1, scaled) so no max pooling window has a tie:
// finite differences are only meaningful away from ties.
Tensor distinct_leaf(const Shape& sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) count *= size;
  std::vector<double> values(static_cast<size_t>(count));
  // 7919 is prime and larger than any test size, so i -> i * 7919 mod count is a permutation.
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = static_cast<double>((i * 7919) % count) / 10.0;
  Tensor leaf = from_vector<double>(values, sizes);
  leaf.requires_grad_(true);
  return leaf;
}

Tensor random_leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

Tensor arange_image(int64_t height, int64_t width, bool requires_grad = false) {
  Tensor image = arange(static_cast<double>(height * width), {.dtype = DType::Float64});
  std::vector<double> values = image.to_vector<double>();
  Tensor result = from_vector<double>(values, {1, 1, height, width});
  if (requires_grad) result.requires_grad_(true);
  return result;
}

void check_gradients(const std::function<Tensor(const Tensor&)>& op, const Tensor& input) {
  GradcheckResult result = gradcheck([&](const std::vector<Tensor>& in) { return op(in[0]); }, {input});
  INFO(result.message);
  CHECK(result.passed);
}

void check_values(const Tensor& actual, const Shape& sizes, const std::vector<double>& expected) {
  CHECK(actual.sizes() == sizes);
  std::vector<double> values = actual.to_vector<double>();
  REQUIRE(values.size() == expected.size());
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i);
    CHECK(values[i] == Approx(expected[i]).margin(1e-12));
  }
}

Pool2dOptions options_of(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                         std::array<int64_t, 2> padding = {0, 0}) {
  Pool2dOptions options;
  options.kernel_size = kernel;
  options.stride = stride;
  options.padding = padding;
  return options;
}

}  // namespace

// ---- values ----

TEST_CASE("max_pool2d picks the window maxima and routes the gradient to them", "[pool]") {
  Tensor x = arange_image(4, 4, true);
  Tensor y = max_pool2d(x, options_of({2, 2}));
  check_values(y, {1, 1, 2, 2}, {5, 7, 13, 15});
  sum(y).backward();
  check_values(x.grad(), {1, 1, 4, 4}, {0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1});
}

TEST_CASE("max_pool2d pads with -inf", "[pool]") {
  // kernel 3, stride 2, padding 1 on a 4x4 image: 2x2 outputs, each window clipped.
  Tensor y = max_pool2d(arange_image(4, 4), options_of({3, 3}, {2, 2}, {1, 1}));
  check_values(y, {1, 1, 2, 2}, {5, 7, 13, 15});
  // All-negative input: padding must never win.
  Tensor negative = from_vector<double>({-4, -3, -2, -1}, {1, 1, 2, 2});
  check_values(max_pool2d(negative, options_of({3, 3}, {2, 2}, {1, 1})), {1, 1, 1, 1}, {-1});
}

TEST_CASE("max_pool2d ceil_mode keeps a last partial window", "[pool]") {
  Pool2dOptions options = options_of({2, 2});
  options.ceil_mode = true;
  check_values(max_pool2d(arange_image(5, 5), options), {1, 1, 3, 3}, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  // The last window must start inside the input or the left padding: 5x5, kernel 2,
  // stride 2, padding 1, ceil would give 4, but the 4th window would start at 6 - 1 = 5,
  // in the right padding, so 3.
  options.padding = {1, 1};
  CHECK(max_pool2d(arange_image(5, 5), options).sizes() == Shape{1, 1, 3, 3});
}

TEST_CASE("max_pool2d with dilation skips positions", "[pool]") {
  Pool2dOptions options = options_of({2, 2}, {1, 1});
  options.dilation = {2, 2};
  // 4x4, dilated kernel spans 3: windows at 0..1, picking (r, c) and (r+2, c+2).
  check_values(max_pool2d(arange_image(4, 4), options), {1, 1, 2, 2}, {10, 11, 14, 15});
}

TEST_CASE("max_pool2d accumulates the gradient of overlapping windows", "[pool]") {
  Tensor x = from_vector<double>({1, 3, 2}, {1, 1, 1, 3});
  x.requires_grad_(true);
  Tensor y = max_pool2d(x, options_of({1, 2}, {1, 1}));
  check_values(y, {1, 1, 1, 2}, {3, 3});
  sum(y).backward();
  check_values(x.grad(), {1, 1, 1, 3}, {0, 2, 0});
}

TEST_CASE("max_pool2d: the first of equal maxima wins, NaN propagates", "[pool]") {
  Tensor ties = from_vector<double>({2, 2, 2, 2}, {1, 1, 2, 2});
  ties.requires_grad_(true);
  Tensor y = max_pool2d(ties, options_of({2, 2}));
  sum(y).backward();
  check_values(ties.grad(), {1, 1, 2, 2}, {1, 0, 0, 0});
  Tensor with_nan = from_vector<double>({1, std::numeric_limits<double>::quiet_NaN(), 5, 2}, {1, 1, 2, 2});
  CHECK(std::isnan(max_pool2d(with_nan, options_of({2, 2})).to_vector<double>()[0]));
}

TEST_CASE("avg_pool2d averages windows, with and without the padding", "[pool]") {
  check_values(avg_pool2d(arange_image(3, 3), options_of({2, 2}, {1, 1})), {1, 1, 2, 2}, {2, 3, 5, 6});
  Tensor x = from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  Pool2dOptions options = options_of({2, 2}, {2, 2}, {1, 1});
  check_values(avg_pool2d(x, options), {1, 1, 2, 2}, {0.25, 0.5, 0.75, 1.0});
  options.count_include_pad = false;
  check_values(avg_pool2d(x, options), {1, 1, 2, 2}, {1, 2, 3, 4});
}

TEST_CASE("avg_pool2d ceil_mode divides a partial window by its clipped size", "[pool]") {
  // PyTorch: the window is clipped to input + padding before the divisor is taken, so the
  // partial windows past the input divide by what they cover, in both modes.
  Pool2dOptions options = options_of({2, 2});
  options.ceil_mode = true;
  for (bool include_pad : {true, false}) {
    options.count_include_pad = include_pad;
    check_values(avg_pool2d(arange_image(3, 3), options), {1, 1, 2, 2}, {2, 3.5, 6.5, 8});
  }
}

TEST_CASE("avg_pool2d backward spreads the gradient over each window", "[pool]") {
  Tensor x = arange_image(3, 3, true);
  sum(avg_pool2d(x, options_of({2, 2}, {1, 1}))).backward();
  check_values(x.grad(), {1, 1, 3, 3}, {0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25});
}

TEST_CASE("adaptive_avg_pool2d: divisible sizes and the global average", "[pool]") {
  check_values(adaptive_avg_pool2d(arange_image(4, 4), {2, 2}), {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5});
  check_values(adaptive_avg_pool2d(arange_image(4, 4), {1, 1}), {1, 1, 1, 1}, {7.5});
  check_values(adaptive_avg_pool2d(arange_image(3, 5), {1, 1}), {1, 1, 1, 1}, {7.0});
}

// ---- gradients ----

TEST_CASE("max_pool2d gradients match finite differences", "[pool]") {
  Tensor x = distinct_leaf({2, 2, 6, 7});
  check_gradients([](const Tensor& in) { return max_pool2d(in, options_of({3, 3}, {1, 1})); }, x);  // overlapping
  check_gradients([](const Tensor& in) { return max_pool2d(in, options_of({3, 3}, {2, 2}, {1, 1})); }, x);
  check_gradients([](const Tensor& in) {
    Pool2dOptions options = options_of({2, 3}, {1, 2}, {1, 1});
    options.dilation = {2, 2};
    return max_pool2d(in, options);
  }, x);
  check_gradients([](const Tensor& in) {
    Pool2dOptions options = options_of({2, 2});
    options.ceil_mode = true;
    return max_pool2d(in, options);
  }, x);
}

TEST_CASE("avg_pool2d gradients match finite differences", "[pool]") {
  Tensor x = random_leaf({2, 2, 5, 6}, 3);
  for (bool include_pad : {true, false}) {
    for (bool ceil_mode : {false, true}) {
      INFO("count_include_pad " << include_pad << ", ceil_mode " << ceil_mode);
      check_gradients([&](const Tensor& in) {
        Pool2dOptions options = options_of({3, 2}, {2, 2}, {1, 1});
        options.count_include_pad = include_pad;
        options.ceil_mode = ceil_mode;
        return avg_pool2d(in, options);
      }, x);
    }
  }
  check_gradients([](const Tensor& in) { return avg_pool2d(in, options_of({2, 2}, {1, 1})); }, x);
}

TEST_CASE("adaptive_avg_pool2d gradients match finite differences", "[pool]") {
  Tensor x = random_leaf({2, 3, 4, 6}, 5);
  check_gradients([](const Tensor& in) { return adaptive_avg_pool2d(in, {1, 1}); }, x);
  check_gradients([](const Tensor& in) { return adaptive_avg_pool2d(in, {2, 3}); }, x);
}

// ---- channels-last ----

// The op on `x` laid out channels-last; the result must keep that layout. Gradients flow
// back through the layout change (Tensor::contiguous(format)), so gradcheck's contiguous
// leaves still work.
Tensor on_channels_last(const std::function<Tensor(const Tensor&)>& op, const Tensor& x) {
  Tensor result = op(x.contiguous(MemoryFormat::ChannelsLast));
  CHECK(is_contiguous_in(result, MemoryFormat::ChannelsLast));
  return result;
}

TEST_CASE("pooling of channels_last inputs: NCHW values, channels_last results, gradients", "[pool]") {
  Tensor x = distinct_leaf({2, 3, 6, 7});
  std::vector<std::function<Tensor(const Tensor&)>> ops = {
      [](const Tensor& in) { return max_pool2d(in, options_of({3, 3}, {1, 1})); },
      [](const Tensor& in) { return max_pool2d(in, options_of({3, 2}, {2, 2}, {1, 1})); },
      [](const Tensor& in) { return avg_pool2d(in, options_of({3, 3}, {2, 1}, {1, 1})); },
      [](const Tensor& in) {
        Pool2dOptions options = options_of({2, 2}, {2, 2}, {1, 1});
        options.count_include_pad = false;
        options.ceil_mode = true;
        return avg_pool2d(in, options);
      },
      [](const Tensor& in) { return adaptive_avg_pool2d(in, {2, 7}); },
      [](const Tensor& in) { return adaptive_avg_pool2d(in, {1, 1}); },  // a window over the whole image
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    INFO("op " << i);
    const auto& op = ops[i];
    Tensor expected = op(x.detach()), actual = on_channels_last(op, x.detach());
    std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    REQUIRE(a.size() == e.size());
    for (size_t k = 0; k < a.size(); ++k) CHECK(a[k] == Approx(e[k]).margin(1e-12));
    check_gradients([&](const Tensor& in) { return on_channels_last(op, in); }, x);
  }
}

// ---- errors ----

TEST_CASE("pooling rejects bad shapes and options with clear messages", "[pool]") {
  Tensor three_d = zeros({1, 4, 4});
  CHECK_THROWS_WITH(max_pool2d(three_d), Catch::Contains("4-D"));
  Tensor image = zeros({1, 1, 20, 20});
  CHECK_THROWS_WITH(max_pool2d(image, options_of({17, 17})), Catch::Contains("256"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({1, 1, 2, 2}), options_of({5, 5})), Catch::Contains("output"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(zeros({1, 1, 5, 5}), {3, 3}), Catch::Contains("not supported yet"));
}

// ---- memory ----

TEST_CASE("max_pool2d keeps exactly one byte per output for backward", "[pool]") {
  Generator generator(11);
  Tensor x = randn({4, 3, 16, 16}, {.requires_grad = true, .category = MemoryCategory::Input}, &generator);
  int64_t before = category_bytes(MemoryCategory::Activation);
  Tensor y = max_pool2d(x, options_of({3, 3}, {2, 2}, {1, 1}));
  CHECK(category_bytes(MemoryCategory::Activation) - before == y.numel());
  y.backward(ones_like(y));
  CHECK(category_bytes(MemoryCategory::Activation) == before);

  // Average pooling keeps nothing.
  Tensor z = avg_pool2d(x, options_of({2, 2}));
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  z.backward(ones_like(z));
}
