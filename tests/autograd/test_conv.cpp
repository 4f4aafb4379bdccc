// tests/autograd/test_conv.cpp — conv2d: values against a naive 7-loop reference on random
// inputs (stride, padding, dilation, groups, bias), gradients of input, weight and bias
// against finite differences, error messages, and what the node saves; channels_last
// against NCHW (values, result layouts, gradients), gradcheck in channels_last,
// arbitrary views made dense, and the input gradient added in place into another branch's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/side_stream.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "autograd/branch_sum.h"
#include "autograd/tensor_checks.h"

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

namespace {

// Output and gradients of conv2d from leaves laid out in the given formats; the upstream
// gradient is random so every entry of every gradient is exercised. The gradients are the
// ones conv2d's backward returns, caught by hooks before accumulation into .grad (which
// may store them in another layout).
struct LayoutRun {
  Tensor output, grad_input, grad_weight, grad_bias;
  // PyTorch's rule: channels_last when the input or weight is (a tensor dense in both
  // layouts, such as a 1x1 weight, counts as NCHW).
  MemoryFormat expected_output_format;
};

LayoutRun run_in(const Config& config, MemoryFormat input_format, MemoryFormat weight_format, uint64_t seed) {
  Tensor input = contiguous_copy(random_tensor(config.input, DType::Float64, seed), input_format).requires_grad_();
  Tensor weight =
      contiguous_copy(random_tensor(config.weight, DType::Float64, seed + 1), weight_format).requires_grad_();
  Tensor bias = random_tensor({config.weight[0]}, DType::Float64, seed + 2).requires_grad_();
  Tensor grad_input, grad_weight;
  input.register_hook([&grad_input](const Tensor& grad) { grad_input = grad; return Tensor(); });
  weight.register_hook([&grad_weight](const Tensor& grad) { grad_weight = grad; return Tensor(); });
  Tensor out = conv2d(input, weight, bias, config.options);
  Tensor upstream = random_tensor(out.sizes(), DType::Float64, seed + 3);
  sum(mul(out, upstream)).backward();
  bool channels_last = suggest_memory_format(input) == MemoryFormat::ChannelsLast ||
                       suggest_memory_format(weight) == MemoryFormat::ChannelsLast;
  return {out, grad_input, grad_weight, bias.grad(),
          channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous};
}

void check_same_values(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.sizes() == expected.sizes());
  std::vector<double> actual = got.to_vector<double>(), reference = expected.to_vector<double>();
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(actual[i] - reference[i]) <= 1e-12 * (1 + std::abs(reference[i])));
  }
}

}  // namespace

TEST_CASE("conv2d in channels_last equals NCHW: values, layouts and gradients", "[conv]") {
  const MemoryFormat nchw = MemoryFormat::Contiguous, channels_last = MemoryFormat::ChannelsLast;
  struct Layouts {
    MemoryFormat input, weight;
  };
  uint64_t seed = 40;
  for (const Config& config : configs()) {
    seed += 10;
    LayoutRun expected = run_in(config, nchw, nchw, seed);
    REQUIRE(expected.output.is_contiguous());
    for (Layouts layouts : {Layouts{channels_last, channels_last}, Layouts{channels_last, nchw},
                            Layouts{nchw, channels_last}}) {
      INFO("input " << config.input << " in " << layouts.input << ", weight " << config.weight << " in "
                    << layouts.weight);
      LayoutRun got = run_in(config, layouts.input, layouts.weight, seed);
      // As PyTorch: a channels_last input or weight makes a channels_last output, and each
      // gradient keeps the layout of its tensor.
      CHECK(is_contiguous_in(got.output, got.expected_output_format));
      CHECK(is_contiguous_in(got.grad_input, layouts.input));
      CHECK(is_contiguous_in(got.grad_weight, layouts.weight));
      check_same_values(got.output, expected.output);
      check_same_values(got.grad_input, expected.grad_input);
      check_same_values(got.grad_weight, expected.grad_weight);
      check_same_values(got.grad_bias, expected.grad_bias);
    }
  }
}

TEST_CASE("conv2d gradients in channels_last match finite differences", "[conv]") {
  auto check = [](const Shape& input_sizes, const Shape& weight_sizes, const Conv2dOptions& options) {
    Tensor input = leaf(input_sizes, 31), weight = leaf(weight_sizes, 32), bias = leaf({weight_sizes[0]}, 33);
    // gradcheck perturbs contiguous leaves; the convolution itself sees channels_last
    // tensors, and its gradients flow back through the layout change.
    GradcheckResult result = gradcheck(
        [options](const std::vector<Tensor>& in) {
          Tensor out = conv2d(in[0].contiguous(MemoryFormat::ChannelsLast),
                              in[1].contiguous(MemoryFormat::ChannelsLast), in[2], options);
          MG_CHECK(suggest_memory_format(out) == MemoryFormat::ChannelsLast, "expected a channels_last output");
          return out;
        },
        {input, weight, bias});
    INFO(result.message);
    CHECK(result.passed);
  };
  SECTION("stride 2, padding 1, dilation 2, groups 2") {
    check({2, 4, 6, 5}, {4, 2, 2, 2}, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .groups = 2});
  }
  SECTION("depthwise 3x3 with padding") { check({1, 3, 4, 4}, {3, 1, 3, 3}, {.padding = {1, 1}, .groups = 3}); }
}

TEST_CASE("conv2d makes arbitrary views dense and still computes the right values", "[conv]") {
  // A transposed (N, C, W, H) tensor viewed as (N, C, H, W) is dense in neither layout.
  Tensor stored = random_tensor({2, 3, 7, 6}, DType::Float64, 61).requires_grad_();
  Tensor input = transpose(stored, 2, 3);  // (2, 3, 6, 7)
  REQUIRE_FALSE(input.is_contiguous());
  REQUIRE_FALSE(is_contiguous_in(input, MemoryFormat::ChannelsLast));
  Tensor weight = random_tensor({4, 3, 3, 3}, DType::Float64, 62);
  Conv2dOptions options{.padding = {1, 1}};
  Tensor out = conv2d(input, weight, {}, options);
  Tensor expected = conv2d(contiguous_copy(input), weight, {}, options);
  check_same_values(out, expected);
  sum(out).backward();
  REQUIRE(stored.grad().defined());
  CHECK(stored.grad().sizes() == stored.sizes());
}

TEST_CASE("conv2d adds its input gradient into another branch's, unless something else holds that one", "[conv]") {
  const Conv2dOptions options{.stride = {2, 1}, .padding = {1, 1}};
  const MemoryFormat format = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  // bfloat16 computes in float32 on the CPU, from a copy of the gradient it adds to.
  const DType dtype = GENERATE(DType::Float64, DType::Float32, DType::BFloat16);
  INFO(dtype << (format == MemoryFormat::ChannelsLast ? " channels_last" : " NCHW"));
  const Tensor values = contiguous_copy(random_tensor({2, 3, 6, 5}, dtype, 31), format);
  const Tensor weight = random_tensor({4, 3, 3, 3}, dtype, 32);
  const Tensor upstream = random_tensor({2, 4, 3, 5}, dtype, 33);
  const Tensor scale = contiguous_copy(random_tensor({2, 3, 6, 5}, dtype, 34), format);
  const Tensor expected = add(mg_test::conv_input_gradient(values, weight, upstream, options), scale);
  const double largest = mg_test::max_abs_difference(expected, zeros_like(expected));
  const double tolerance = largest * (dtype == DType::Float64 ? 1e-14 : dtype == DType::Float32 ? 1e-6 : 1e-2);
  auto fresh_leaf = [&] { return contiguous_copy(values.detach().clone(), format).requires_grad_(); };

  SECTION("the branch's buffer is the only handle: the sum is made in it") {
    mg_test::BranchSum got =
        mg_test::conv_beside_branch(fresh_leaf(), weight, upstream, scale, options,
                                    /*keep=*/false, format);
    CHECK(got.summed_in_branch_buffer);
    CHECK(is_contiguous_in(got.grad_of_x, format));
    CHECK(mg_test::max_abs_difference(got.grad_of_x, expected) <= tolerance);
  }
  SECTION("the branch keeps its gradient: the engine sums into a new tensor and the kept one is untouched") {
    mg_test::BranchSum got =
        mg_test::conv_beside_branch(fresh_leaf(), weight, upstream, scale, options,
                                    /*keep=*/true, format);
    CHECK_FALSE(got.summed_in_branch_buffer);
    CHECK(mg_test::max_abs_difference(got.grad_of_x, expected) <= tolerance);
    CHECK(mg_test::max_abs_difference(got.kept, scale) == 0.0);
  }
  SECTION("the branch's gradient is in the other layout: the engine sums into a new tensor") {
    const MemoryFormat other = format == MemoryFormat::ChannelsLast ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
    mg_test::BranchSum got = mg_test::conv_beside_branch(fresh_leaf(), weight, upstream,
                                                         scale, options, /*keep=*/false, other);
    CHECK_FALSE(got.summed_in_branch_buffer);
    CHECK(mg_test::max_abs_difference(got.grad_of_x, expected) <= tolerance);
  }
}

TEST_CASE("conv2d: weight gradients on a side stream change nothing off CUDA", "[conv]") {
  // The switch names CUDA streams (autograd/side_stream.h); on the CPU backward runs as
  // before, with the same gradients, and no work goes to a side stream.
  Generator generator(31);
  const Tensor input = randn({2, 3, 7, 7}, {.dtype = DType::Float64}, &generator);
  const Tensor weight = randn({4, 3, 3, 3}, {.dtype = DType::Float64, .requires_grad = true}, &generator);
  conv2d(input, weight, Tensor(), Conv2dOptions{}).sum().backward();
  const Tensor expected = weight.grad().clone();
  weight.set_grad(Tensor());
  const bool before = autograd::weight_gradients_on_side_stream();
  const uint64_t runs_before = autograd::side_stream_runs();
  autograd::set_weight_gradients_on_side_stream(true);
  conv2d(input, weight, Tensor(), Conv2dOptions{}).sum().backward();
  autograd::set_weight_gradients_on_side_stream(before);
  CHECK(autograd::side_stream_runs() == runs_before);
  CHECK(mg_test::max_abs_difference(weight.grad(), expected) == 0.0);
}
