// tests/autograd/test_conv.cpp — conv2d: values against a naive 7-loop reference on random
// inputs (stride, padding, dilation, groups, bias), gradients of input, weight and bias
// against finite differences, error messages, and what the node saves.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/conv.h"
#include "autograd/gradcheck.h"
#include "autograd/reduce.h"
#include "core/factory.h"

using namespace mg;

namespace {

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

Tensor random_tensor(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype}, &generator);
}

// The reference: out[n, k, p, q] = bias[k] + sum over (c, r, s) of the group's channels.
std::vector<double> naive_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                 const Conv2dOptions& options, const Shape& out_sizes) {
  std::vector<double> x = input.to_vector<double>(), w = weight.to_vector<double>();
  std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  int64_t n_count = input.sizes()[0], c_count = input.sizes()[1], h_count = input.sizes()[2], w_count = input.sizes()[3];
  int64_t k_count = weight.sizes()[0], c_group = weight.sizes()[1], r_count = weight.sizes()[2], s_count = weight.sizes()[3];
  int64_t p_count = out_sizes[2], q_count = out_sizes[3];
  int64_t k_group = k_count / options.groups;
  std::vector<double> out(static_cast<size_t>(n_count * k_count * p_count * q_count));
  for (int64_t n = 0; n < n_count; ++n)
    for (int64_t k = 0; k < k_count; ++k)
      for (int64_t p = 0; p < p_count; ++p)
        for (int64_t q = 0; q < q_count; ++q) {
          double total = b.empty() ? 0.0 : b[k];
          int64_t group = k / k_group;
          for (int64_t c = 0; c < c_group; ++c)
            for (int64_t r = 0; r < r_count; ++r)
              for (int64_t s = 0; s < s_count; ++s) {
                int64_t h = p * options.stride[0] - options.padding[0] + r * options.dilation[0];
                int64_t wi = q * options.stride[1] - options.padding[1] + s * options.dilation[1];
                if (h < 0 || h >= h_count || wi < 0 || wi >= w_count) continue;
                int64_t channel = group * c_group + c;
                total += x[((n * c_count + channel) * h_count + h) * w_count + wi] *
                         w[((k * c_group + c) * r_count + r) * s_count + s];
              }
          out[((n * k_count + k) * p_count + p) * q_count + q] = total;
        }
  return out;
}

struct Config {
  Shape input, weight;
  Conv2dOptions options;
  bool with_bias;
};

std::vector<Config> configs() {
  return {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {}, true},
      {{2, 4, 9, 8}, {6, 2, 3, 2}, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2}, true},
      {{3, 4, 5, 5}, {8, 4, 1, 1}, {}, false},
      {{1, 6, 8, 7}, {6, 1, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .groups = 6}, true},
      {{2, 2, 4, 4}, {3, 2, 2, 2}, {.stride = {3, 3}, .padding = {0, 0}, .dilation = {3, 3}}, true},
  };
}

}  // namespace

TEST_CASE("conv2d matches a naive 7-loop reference", "[conv]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Config& config : configs()) {
      Tensor input = random_tensor(config.input, dtype, 1);
      Tensor weight = random_tensor(config.weight, dtype, 2);
      Tensor bias = config.with_bias ? random_tensor({config.weight[0]}, dtype, 3) : Tensor();
      Tensor out = conv2d(input, weight, bias, config.options);
      std::vector<double> expected = naive_conv2d(input, weight, bias, config.options, out.sizes());
      std::vector<double> actual = out.to_vector<double>();
      REQUIRE(actual.size() == expected.size());
      double tolerance = dtype == DType::Float64 ? 1e-12 : 1e-4;
      for (size_t i = 0; i < actual.size(); ++i) {
        INFO("input " << config.input << " weight " << config.weight << " element " << i);
        REQUIRE(std::abs(actual[i] - expected[i]) <= tolerance * (1 + std::abs(expected[i])));
      }
    }
  }
}

TEST_CASE("conv2d output size follows the PyTorch formula", "[conv]") {
  Tensor out = conv2d(zeros({2, 4, 9, 8}), zeros({6, 2, 3, 2}), {},
                      {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2});
  // P = (9 + 2 - 2*2 - 1)/2 + 1 = 4, Q = (8 + 4 - 1*1 - 1)/1 + 1 = 11
  CHECK(out.sizes() == Shape{2, 6, 4, 11});
}

TEST_CASE("conv2d gradients match finite differences", "[conv]") {
  auto check = [](const Shape& input_sizes, const Shape& weight_sizes, const Conv2dOptions& options) {
    Tensor input = leaf(input_sizes, 11), weight = leaf(weight_sizes, 12), bias = leaf({weight_sizes[0]}, 13);
    GradcheckResult result = gradcheck(
        [options](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], options); },
        {input, weight, bias});
    INFO(result.message);
    CHECK(result.passed);
  };
  SECTION("stride 2, padding 1, dilation 2, groups 2") {
    check({2, 4, 6, 5}, {4, 2, 2, 2}, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .groups = 2});
  }
  SECTION("1x1") { check({2, 3, 3, 2}, {2, 3, 1, 1}, {}); }
  SECTION("plain 3x3 with padding") { check({1, 2, 4, 4}, {3, 2, 3, 3}, {.padding = {1, 1}}); }
}

TEST_CASE("conv2d saves only what the requested gradients need", "[conv]") {
  // Only the input requires grad: the weight is needed, the input is not; backward works.
  Tensor input = leaf({1, 2, 4, 4}, 21);
  Tensor weight = random_tensor({3, 2, 3, 3}, DType::Float64, 22);
  Tensor out = conv2d(input, weight);
  sum(out).backward();
  REQUIRE(input.grad().defined());
  CHECK(input.grad().sizes() == input.sizes());
}

TEST_CASE("conv2d rejects bad arguments with clear messages", "[conv]") {
  CHECK_THROWS_WITH(conv2d(zeros({1, 3, 2, 2}), zeros({4, 3, 3, 3})),
                    "conv2d: input [1, 3, 2, 2] is smaller than the dilated kernel 3x3 with padding 0. Hint: pad "
                    "the input or use a smaller kernel or dilation.");
  CHECK_THROWS_WITH(conv2d(zeros({3, 2, 2}), zeros({4, 3, 1, 1})), Catch::Contains("4-D"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 3, 4, 4}), zeros({4, 3, 1, 1}), {}, {.groups = 2}),
                    Catch::Contains("not divisible by groups"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({3, 2, 1, 1}), {}, {.groups = 2}),
                    Catch::Contains("output channels, not divisible"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({4, 4, 1, 1}), {}, {.groups = 2}),
                    Catch::Contains("C / groups"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({4, 4, 1, 1}), zeros({5})), Catch::Contains("bias"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({4, 4, 1, 1}, {.dtype = DType::Float64})),
                    Catch::Contains("float64"));
}
