// tests/autograd/test_layer_norm.cpp — layer_norm: forward values against the formula
// written out by hand (one and two normalised dims, with and without weight and bias),
// gradients against finite differences, the bytes its node keeps (the input and two
// values a row), 16-bit inputs with float32 parameters, autocast to float32, and the
// errors. add_layer_norm (the residual add fused in): both outputs against the add and
// layer_norm apart, bit for bit; gradients of either and both against finite differences;
// one node; a float32 sum of a 16-bit residual; the fallback where it cannot fuse.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/layer_norm.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;

namespace {

Tensor normal(const Shape& sizes, uint64_t seed, bool requires_grad = false, DType dtype = DType::Float64) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype, .requires_grad = requires_grad}, &generator);
}

int64_t activation_bytes() {
  return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current;
}

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  GradcheckResult result = gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

// layer_norm of a row-major (rows, cols) buffer, written out: (x - mean) / sqrt(var + eps)
// * w + b with the biased variance; empty w / b mean 1 / 0.
std::vector<double> by_hand(const std::vector<double>& x, int64_t rows, int64_t cols, const std::vector<double>& w,
                            const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x[r * cols + c] - mean, 2) / cols;
    for (int64_t c = 0; c < cols; ++c) {
      double normalised = (x[r * cols + c] - mean) / std::sqrt(var + eps);
      y[r * cols + c] = normalised * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
    }
  }
  return y;
}

void check_values(const Tensor& actual, const std::vector<double>& expected, double margin) {
  std::vector<double> got = actual.to(DType::Float64).to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(margin));
}

}  // namespace

TEST_CASE("layer_norm forward matches the formula", "[layer_norm]") {
  SECTION("2-D input, last dim, weight and bias") {
    Tensor x = normal({3, 5}, 1), weight = normal({5}, 2), bias = normal({5}, 3);
    Tensor out = layer_norm(x, {5}, weight, bias, 1e-5);
    CHECK(out.sizes() == Shape{3, 5});
    CHECK(out.dtype() == DType::Float64);
    check_values(out, by_hand(x.to_vector<double>(), 3, 5, weight.to_vector<double>(), bias.to_vector<double>(), 1e-5),
                 1e-12);
  }
  SECTION("3-D input, two normalised dims, no affine") {
    Tensor x = normal({2, 3, 4}, 4);
    Tensor out = layer_norm(x, {3, 4}, {}, {}, 1e-3);
    check_values(out, by_hand(x.to_vector<double>(), 2, 12, {}, {}, 1e-3), 1e-12);
  }
  SECTION("3-D input, last dim, weight only; a constant row normalises to zero") {
    Tensor x = from_vector<double>({1, 2, 3, 4, 7, 7, 7, 7, -2, 0, 2, 8}, {1, 3, 4});
    Tensor weight = from_vector<double>({1, -1, 2, 0.5});
    Tensor out = layer_norm(x, {4}, weight);
    // Row 0: mean 2.5, var 1.25.
    const double invstd = 1 / std::sqrt(1.25 + 1e-5);
    std::vector<double> got = out.to_vector<double>();
    CHECK(got[0] == Approx(-1.5 * invstd * 1).epsilon(1e-14));
    CHECK(got[1] == Approx(-0.5 * invstd * -1).epsilon(1e-14));
    CHECK(got[3] == Approx(1.5 * invstd * 0.5).epsilon(1e-14));
    for (int c = 4; c < 8; ++c) CHECK(got[c] == 0.0);
    check_values(out, by_hand(x.to_vector<double>(), 3, 4, {1, -1, 2, 0.5}, {}, 1e-5), 1e-12);
  }
  SECTION("float32 rows far from zero keep their variance (two passes)") {
    std::vector<double> values;
    for (int i = 0; i < 64; ++i) values.push_back(1000.0 + 0.01 * ((i * 37) % 11 - 5));
    Tensor x = from_vector<double>(values, {2, 32});
    Tensor out = layer_norm(x.to(DType::Float32), {32});
    check_values(out, by_hand(values, 2, 32, {}, {}, 1e-5), 2e-3);
  }
}

TEST_CASE("layer_norm gradients match finite differences", "[layer_norm]") {
  SECTION("2-D input with weight and bias") {
    Tensor x = normal({4, 5}, 10, true), weight = normal({5}, 11, true), bias = normal({5}, 12, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {5}, in[1], in[2]); },
                    {x, weight, bias});
  }
  SECTION("3-D input, last dim") {
    Tensor x = normal({2, 3, 4}, 13, true), weight = normal({4}, 14, true), bias = normal({4}, 15, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
                    {x, weight, bias});
  }
  SECTION("3-D input, two normalised dims") {
    Tensor x = normal({2, 3, 4}, 16, true), weight = normal({3, 4}, 17, true), bias = normal({3, 4}, 18, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 4}, in[1], in[2], 1e-3); },
                    {x, weight, bias});
  }
  SECTION("without weight and bias") {
    Tensor x = normal({3, 6}, 19, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {6}); }, {x});
    Tensor x3 = normal({2, 2, 3}, 20, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 3}); }, {x3});
  }
  SECTION("weight only, bias only, and parameters alone") {
    Tensor x = normal({3, 4}, 21, true), weight = normal({4}, 22, true), bias = normal({4}, 23, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1]); }, {x, weight});
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, {}, in[1]); }, {x, bias});
    Tensor frozen = x.detach();
    check_gradients([&](const std::vector<Tensor>& in) { return layer_norm(frozen, {4}, in[0], in[1]); },
                    {weight, bias});
  }
  SECTION("a non-contiguous input and gradient") {
    Tensor x = normal({5, 3}, 24, true), weight = normal({5}, 25, true);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0].t(), {5}, in[1]).t(); }, {x, weight});
  }
}

TEST_CASE("layer_norm records one node that keeps the input and two statistics a row", "[layer_norm]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    INFO(dtype);
    const int64_t rows = 6, cols = 8;
    const int64_t statistic_bytes = dtype == DType::Float64 ? 8 : 4;
    Tensor weight = ones({cols}, {.dtype = dtype == DType::Float64 ? dtype : DType::Float32});
    Tensor bias = zeros({cols}, {.dtype = weight.dtype()});
    for (const Tensor& parameter : {weight, bias}) {
      parameter.requires_grad_();
      parameter.set_memory_category(MemoryCategory::Parameter);
    }
    int64_t before = activation_bytes();
    {
      Tensor x = normal({2, 3, cols}, 30, true, dtype);
      Tensor out = layer_norm(x, {cols}, weight, bias);
      CHECK(out.dtype() == dtype);
      REQUIRE(out.grad_fn() != nullptr);
      CHECK(std::string(out.grad_fn()->name()) == "LayerNormBackward");
      CHECK(out.grad_fn()->next_edges().size() == 3);
      CHECK(activation_bytes() - before == static_cast<int64_t>(x.nbytes()) + 2 * rows * statistic_bytes);
      sum(out).backward();
      CHECK(activation_bytes() == before);
      CHECK(weight.grad().dtype() == weight.dtype());
      CHECK(x.grad().dtype() == dtype);
      // Each normalised row sums to zero, so the gradient of sum(out) with a unit weight is zero.
      for (double value : x.grad().to(DType::Float64).to_vector<double>()) CHECK(value == Approx(0.0).margin(1e-2));
      // grad_bias counts the rows.
      for (double value : bias.grad().to(DType::Float64).to_vector<double>()) CHECK(value == rows);
    }
    CHECK(activation_bytes() == before);
  }
}

TEST_CASE("layer_norm of 16-bit inputs: float32 parameters allowed, float32 under autocast", "[layer_norm]") {
  Tensor x32 = normal({4, 16}, 40, false, DType::Float32);
  Tensor x16 = x32.to(DType::BFloat16);
  Tensor weight = normal({16}, 41, false, DType::Float32), bias = normal({16}, 42, false, DType::Float32);
  std::vector<double> expected = by_hand(x16.to(DType::Float64).to_vector<double>(), 4, 16,
                                         weight.to(DType::Float64).to_vector<double>(),
                                         bias.to(DType::Float64).to_vector<double>(), 1e-5);
  // Without autocast: a bfloat16 result (one rounding of the float result).
  Tensor plain = layer_norm(x16, {16}, weight, bias);
  CHECK(plain.dtype() == DType::BFloat16);
  check_values(plain, expected, 3e-2);
  {
    amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    Tensor leaf = x16.detach().requires_grad_();
    Tensor out = layer_norm(leaf, {16}, weight, bias);
    CHECK(out.dtype() == DType::Float32);
    check_values(out, expected, 1e-5);
    sum(mul(out, out)).backward();
    CHECK(leaf.grad().dtype() == DType::BFloat16);  // through the differentiable cast
    // A float32 input is left as it is.
    CHECK(layer_norm(x32, {16}, weight, bias).dtype() == DType::Float32);
  }
}

TEST_CASE("layer_norm errors explain themselves", "[layer_norm]") {
  Tensor x = normal({2, 3, 4}, 50);
  CHECK(contains(error_message([&] { layer_norm(x, {3}); }),
                 "layer_norm: the input's trailing dims must equal normalized_shape [3], got input of shape [2, 3, 4]"));
  CHECK(contains(error_message([&] { layer_norm(x, {4, 4}); }), "trailing dims must equal normalized_shape [4, 4]"));
  CHECK(contains(error_message([&] { layer_norm(x, {1, 2, 3, 4}); }), "normalized_shape [1, 2, 3, 4]"));
  CHECK(contains(error_message([&] { layer_norm(x, {}); }),
                 "layer_norm: expected a normalized_shape of at least one dim and one element, got []"));
  CHECK(contains(error_message([&] { layer_norm(x, {4}, normal({3}, 51)); }),
                 "layer_norm: expected weight of shape [4] (normalized_shape), got shape [3]"));
  CHECK(contains(error_message([&] { layer_norm(x, {3, 4}, {}, normal({12}, 52)); }),
                 "expected bias of shape [3, 4] (normalized_shape), got shape [12]"));
  CHECK(contains(error_message([&] { layer_norm(x, {4}, normal({4}, 53, false, DType::Float32)); }),
                 "layer_norm: expected weight of the input's dtype float64, got float32"));
  CHECK(contains(error_message([&] {
                   layer_norm(x.to(DType::Float16), {4}, normal({4}, 54, false, DType::Float32),
                              normal({4}, 55, false, DType::Float16));
                 }),
                 "layer_norm: expected weight and bias of one dtype, got float32 and float16"));
  CHECK(contains(error_message([&] { layer_norm(zeros({2, 4}, {.dtype = DType::Int64}), {4}); }),
                 "layer_norm: expected a floating-point tensor, got int64"));
  CHECK(contains(error_message([&] { layer_norm(x, {4}, {}, {}, -1.0); }), "layer_norm: expected a non-negative eps"));
  // No rows at all is fine: an empty result, and zero parameter gradients.
  Tensor empty_rows = zeros({0, 4}, {.dtype = DType::Float64});
  Tensor weight = normal({4}, 56, true);
  Tensor out = layer_norm(empty_rows, {4}, weight);
  CHECK(out.sizes() == Shape{0, 4});
  sum(out).backward();
  CHECK(weight.grad().to_vector<double>() == std::vector<double>(4, 0.0));
}

namespace {

// add_layer_norm's sum and output, both used by the loss (as a pre-norm block uses them:
// the sum goes on down the residual stream, the output into the next layer).
Tensor sum_and_norm_loss(const SumAndNorm& result, const Tensor& sum_weights, const Tensor& norm_weights) {
  return (result.sum * sum_weights).sum() + (result.output * norm_weights).sum();
}

}  // namespace

TEST_CASE("add_layer_norm gives the add and layer_norm's values bit for bit, with one node", "[layer_norm]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    Tensor x = normal({6, 8}, 40, true, dtype), residual = normal({6, 8}, 41, true, dtype);
    Tensor weight = normal({8}, 42, true, dtype), bias = normal({8}, 43, true, dtype);
    const SumAndNorm fused = add_layer_norm(x, residual, {8}, weight, bias);
    const Tensor sum = x + residual;
    const Tensor apart = layer_norm(sum, {8}, weight, bias);
    CHECK(fused.sum.to_vector<double>() == sum.to(DType::Float64).to_vector<double>());
    CHECK(fused.output.to(DType::Float64).to_vector<double>() == apart.to(DType::Float64).to_vector<double>());
    REQUIRE(fused.sum.grad_fn() != nullptr);
    CHECK(fused.sum.grad_fn() == fused.output.grad_fn());
    CHECK(std::string(fused.sum.grad_fn()->name()) == "AddLayerNormBackward");
  }
}

TEST_CASE("add_layer_norm gradients match finite differences, through either output or both", "[layer_norm]") {
  Tensor x = normal({4, 5}, 44, true), residual = normal({4, 5}, 45, true);
  Tensor weight = normal({5}, 46, true), bias = normal({5}, 47, true);
  const Tensor sum_weights = normal({4, 5}, 48), norm_weights = normal({4, 5}, 49);
  SECTION("both outputs") {
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return sum_and_norm_loss(add_layer_norm(in[0], in[1], {5}, in[2], in[3]), sum_weights, norm_weights);
        },
        {x, residual, weight, bias});
  }
  SECTION("the normalised output alone") {
    check_gradients(
        [&](const std::vector<Tensor>& in) { return add_layer_norm(in[0], in[1], {5}, in[2], in[3]).output; },
        {x, residual, weight, bias});
  }
  SECTION("the sum alone") {
    check_gradients([&](const std::vector<Tensor>& in) { return add_layer_norm(in[0], in[1], {5}, weight).sum; },
                    {x, residual});
  }
  SECTION("without weight and bias, three dims, a non-contiguous residual") {
    Tensor x3 = normal({2, 3, 4}, 50, true), r3 = normal({2, 4, 3}, 51, true);
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          const SumAndNorm result = add_layer_norm(in[0], in[1].transpose(1, 2), {4});
          return (result.sum * result.output).sum();
        },
        {x3, r3});
  }
}

TEST_CASE("add_layer_norm's gradients equal the add and layer_norm's", "[layer_norm]") {
  const Tensor sum_weights = normal({6, 8}, 52), norm_weights = normal({6, 8}, 53);
  auto gradients = [&](bool fused) {
    Tensor x = normal({6, 8}, 54, true), residual = normal({6, 8}, 55, true);
    Tensor weight = normal({8}, 56, true), bias = normal({8}, 57, true);
    Tensor loss;
    if (fused) {
      loss = sum_and_norm_loss(add_layer_norm(x, residual, {8}, weight, bias), sum_weights, norm_weights);
    } else {
      const Tensor sum = x + residual;
      loss = sum_and_norm_loss({sum, layer_norm(sum, {8}, weight, bias)}, sum_weights, norm_weights);
    }
    loss.backward();
    std::vector<std::vector<double>> result;
    for (const Tensor& leaf : {x, residual, weight, bias}) result.push_back(leaf.grad().to_vector<double>());
    return result;
  };
  const auto fused = gradients(true), apart = gradients(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("input " << i);
    REQUIRE(fused[i].size() == apart[i].size());
    for (size_t k = 0; k < fused[i].size(); ++k) CHECK(fused[i][k] == Approx(apart[i][k]).margin(1e-12));
  }
}

TEST_CASE("add_layer_norm of a float32 stream and a bfloat16 residual sums in float32, in either order",
          "[layer_norm]") {
  Tensor stream = normal({4, 16}, 58, true, DType::Float32);
  Tensor residual = normal({4, 16}, 59, false, DType::Float32).to(DType::BFloat16).requires_grad_();
  Tensor weight = normal({16}, 60, true, DType::Float32);
  for (bool stream_first : {true, false}) {
    INFO("stream first: " << stream_first);
    const SumAndNorm fused = stream_first ? add_layer_norm(stream, residual, {16}, weight)
                                          : add_layer_norm(residual, stream, {16}, weight);
    CHECK(fused.sum.dtype() == DType::Float32);
    CHECK(fused.output.dtype() == DType::Float32);
    CHECK(std::string(fused.sum.grad_fn()->name()) == "AddLayerNormBackward");
    const Tensor sum = stream + residual;
    CHECK(fused.sum.to_vector<double>() == sum.to(DType::Float64).to_vector<double>());
    CHECK(fused.output.to_vector<double>() ==
          layer_norm(sum, {16}, weight).to(DType::Float64).to_vector<double>());
    stream.set_grad(Tensor());
    residual.set_grad(Tensor());
    (fused.sum.sum() + fused.output.sum()).backward();
    CHECK(stream.grad().dtype() == DType::Float32);
    CHECK(residual.grad().dtype() == DType::BFloat16);
  }
  SECTION("under autocast the float32 stream still fuses, and the output is float32") {
    amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    const SumAndNorm fused = add_layer_norm(stream, residual, {16}, weight);
    CHECK(std::string(fused.sum.grad_fn()->name()) == "AddLayerNormBackward");
    CHECK(fused.output.dtype() == DType::Float32);
  }
}

TEST_CASE("add_layer_norm falls back to the add and layer_norm where one kernel cannot do both", "[layer_norm]") {
  Tensor x = normal({3, 4}, 61, true), row = normal({4}, 62, true);
  const SumAndNorm broadcast = add_layer_norm(x, row, {4});  // the residual broadcast over the rows
  const Tensor sum = x + row;
  CHECK(broadcast.sum.to_vector<double>() == sum.to_vector<double>());
  CHECK(broadcast.output.to_vector<double>() == layer_norm(sum, {4}).to_vector<double>());
  check_gradients(
      [](const std::vector<Tensor>& in) {
        const SumAndNorm result = add_layer_norm(in[0], in[1], {4});
        return (result.sum * result.output).sum();
      },
      {x, row});
  const std::string message = error_message([&] { add_layer_norm(x, Tensor(), {4}); });
  CHECK(contains(message, "add_layer_norm"));
}
