// tests/optim/test_clip_grad.cpp — clip_grad_norm_ and clip_grad_value_ against norms
// computed by hand or on the host in float64: norms 1, 2, 3 and inf, mixed dtypes in one
// list (float32, bfloat16, float16, float64), more tensors than one CUDA launch holds, a
// gradient past float32's 2^24 exact integers, empty and non-dense gradients, NaN.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using Values = std::vector<double>;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor make_param(const Values& values) {
  Tensor param = from_vector(values, {static_cast<int64_t>(values.size())},
                             {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

void set_grad(const Tensor& param, const Values& values) {
  param.set_grad(from_vector(values, param.sizes(), {.category = MemoryCategory::Gradient}));
}

// A parameter of `dtype` whose gradient holds fresh normal values.
Tensor param_with_random_grad(const Shape& sizes, DType dtype, Generator& generator) {
  Tensor param = zeros(sizes, {.dtype = dtype, .category = MemoryCategory::Parameter});
  param.requires_grad_();
  param.set_grad(randn(sizes, {}, &generator).to(dtype));
  return param;
}

// The norm of every gradient of `params` concatenated, in float64 from the stored values.
double host_norm(const std::vector<Tensor>& params, double norm_type) {
  double total = 0;
  for (const Tensor& param : params) {
    if (!param.grad().defined()) continue;
    for (double value : param.grad().to_vector<double>()) {
      total = std::isinf(norm_type) ? std::max(total, std::abs(value)) : total + std::pow(std::abs(value), norm_type);
    }
  }
  return std::isinf(norm_type) ? total : std::pow(total, 1.0 / norm_type);
}

std::vector<Values> grads_of(const std::vector<Tensor>& params) {
  std::vector<Values> grads;
  for (const Tensor& param : params) grads.push_back(param.grad().to_vector<double>());
  return grads;
}

// Relative error allowed for a gradient of `dtype` after one rounding.
double rounding(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-15;
    case DType::Float32: return 1e-7;
    case DType::Float16: return 1e-3;
    default: return 8e-3;  // bfloat16
  }
}

}  // namespace

TEST_CASE("clip_grad_norm_ scales gradients above max_norm and returns the total norm", "[clip_grad]") {
  Tensor first = make_param({0, 0, 0});
  Tensor second = make_param({0, 0});
  Tensor no_grad = make_param({0});  // skipped
  const Values first_grad = {3.0, -4.0, 1.0};
  const Values second_grad = {-2.0, 0.5};
  set_grad(first, first_grad);
  set_grad(second, second_grad);
  const double l2 = std::sqrt(9 + 16 + 1 + 4 + 0.25);
  std::vector<Tensor> params = {first, no_grad, second};

  SECTION("above max_norm: scaled so the norm is max_norm") {
    uint64_t version = first.grad().version();
    Tensor total = optim::clip_grad_norm_(params, 1.0);
    REQUIRE(total.dim() == 0);
    REQUIRE(total.device() == first.device());
    REQUIRE_THAT(total.item<float>(), WithinRel(l2, 1e-6));
    REQUIRE(first.grad().version() > version);
    double coefficient = 1.0 / (l2 + 1e-6);
    Values scaled_first = first.grad().to_vector<double>();
    Values scaled_second = second.grad().to_vector<double>();
    double norm_sq = 0;
    for (size_t i = 0; i < 3; ++i) {
      REQUIRE_THAT(scaled_first[i], WithinAbs(first_grad[i] * coefficient, 1e-6));
      norm_sq += scaled_first[i] * scaled_first[i];
    }
    for (size_t i = 0; i < 2; ++i) {
      REQUIRE_THAT(scaled_second[i], WithinAbs(second_grad[i] * coefficient, 1e-6));
      norm_sq += scaled_second[i] * scaled_second[i];
    }
    REQUIRE_THAT(std::sqrt(norm_sq), WithinAbs(1.0, 1e-5));
    REQUIRE_FALSE(no_grad.grad().defined());
  }
  SECTION("below max_norm: unchanged") {
    Tensor total = optim::clip_grad_norm_(params, 100.0);
    REQUIRE_THAT(total.item<float>(), WithinRel(l2, 1e-6));
    REQUIRE(first.grad().to_vector<double>() == first_grad);
    REQUIRE(second.grad().to_vector<double>() == second_grad);
  }
  SECTION("infinity norm: the largest absolute value") {
    Tensor total = optim::clip_grad_norm_(params, 2.0, kInf);
    REQUIRE_THAT(total.item<float>(), WithinRel(4.0, 1e-6));
    Values scaled = first.grad().to_vector<double>();
    REQUIRE_THAT(scaled[1], WithinAbs(-4.0 * 2.0 / (4.0 + 1e-6), 1e-6));
  }
  SECTION("p = 1 and p = 3") {
    Tensor one = optim::clip_grad_norm_(params, 100.0, 1.0);
    REQUIRE_THAT(one.item<float>(), WithinRel(3 + 4 + 1 + 2 + 0.5, 1e-6));
    Tensor three = optim::clip_grad_norm_(params, 100.0, 3.0);
    REQUIRE_THAT(three.item<float>(), WithinRel(std::cbrt(27 + 64 + 1 + 8 + 0.125), 1e-5));
  }
  SECTION("no gradients at all: zero, nothing changed") {
    Tensor total = optim::clip_grad_norm_({no_grad}, 1.0);
    REQUIRE(total.dim() == 0);
    REQUIRE(total.item<float>() == 0.0f);
  }
  SECTION("invalid norm_type") {
    REQUIRE_THROWS_WITH(optim::clip_grad_norm_(params, 1.0, 0.0), Contains("norm_type must be > 0"));
  }
}

TEST_CASE("clip_grad_norm_ over float32, bfloat16 and float16 gradients in one list", "[clip_grad]") {
  for (double norm_type : {1.0, 2.0, 3.0, kInf}) {
    INFO("norm_type " << norm_type);
    Generator generator(7);
    std::vector<Tensor> params = {param_with_random_grad({1000}, DType::Float32, generator),
                                  param_with_random_grad({33, 21}, DType::BFloat16, generator),
                                  param_with_random_grad({300}, DType::Float16, generator),
                                  param_with_random_grad({5}, DType::BFloat16, generator)};
    const std::vector<Values> before = grads_of(params);
    const double expected = host_norm(params, norm_type);
    const double max_norm = 0.25 * expected;

    const Tensor total = optim::clip_grad_norm_(params, max_norm, norm_type);
    CHECK(total.dtype() == DType::Float32);  // the gradients' promoted dtype
    CHECK_THAT(total.item<float>(), WithinRel(expected, 1e-6));

    // Every gradient scaled by the one coefficient, rounded once to its own dtype.
    const double coefficient = max_norm / (expected + 1e-6);
    for (size_t t = 0; t < params.size(); ++t) {
      const Values after = params[t].grad().to_vector<double>();
      const double tolerance = rounding(params[t].dtype()) + 1e-6;
      for (size_t i = 0; i < after.size(); ++i) {
        // NOTE: plus float16's subnormal spacing, for the values that scale below its normal range.
        REQUIRE_THAT(after[i], WithinAbs(before[t][i] * coefficient,
                                         tolerance * std::abs(before[t][i] * coefficient) + 1e-7));
      }
    }
    CHECK_THAT(host_norm(params, norm_type), WithinRel(max_norm, 1e-2));
  }
}

TEST_CASE("clip_grad_norm_ returns the gradients' promoted dtype and accumulates float64 in float64", "[clip_grad]") {
  Generator generator(8);
  SECTION("bfloat16 only: a bfloat16 norm") {
    std::vector<Tensor> params = {param_with_random_grad({64}, DType::BFloat16, generator),
                                  param_with_random_grad({7}, DType::BFloat16, generator)};
    const double expected = host_norm(params, 2.0);
    const Tensor total = optim::clip_grad_norm_(params, 1e9);
    CHECK(total.dtype() == DType::BFloat16);
    CHECK_THAT(total.item<float>(), WithinRel(expected, rounding(DType::BFloat16)));
  }
  SECTION("float64 beside float32: a float64 norm, exact to float64's rounding") {
    std::vector<Tensor> params = {param_with_random_grad({500}, DType::Float64, generator),
                                  param_with_random_grad({300}, DType::Float32, generator)};
    for (double norm_type : {1.0, 2.0, 3.0, kInf}) {
      INFO("norm_type " << norm_type);
      const double expected = host_norm(params, norm_type);
      const Values float64_before = params[0].grad().to_vector<double>();
      const Tensor total = optim::clip_grad_norm_(params, 0.5 * expected, norm_type);
      CHECK(total.dtype() == DType::Float64);
      CHECK_THAT(total.item<double>(), WithinRel(expected, 1e-12));
      const double coefficient = 0.5 * expected / (expected + 1e-6);
      const Values float64_after = params[0].grad().to_vector<double>();
      for (size_t i = 0; i < float64_after.size(); ++i) {
        REQUIRE_THAT(float64_after[i], WithinRel(float64_before[i] * coefficient, 1e-12));
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ over more gradients than one CUDA launch holds", "[clip_grad]") {
  // A multi-tensor launch of one list takes 1160 tensors (cuda/kernels/multi_tensor_apply.cuh).
  Generator generator(9);
  std::vector<Tensor> params;
  for (int i = 0; i < 3000; ++i) {
    params.push_back(param_with_random_grad({i % 5 + 1}, i % 3 == 0 ? DType::BFloat16 : DType::Float32, generator));
  }
  const std::vector<Values> before = grads_of(params);
  for (double norm_type : {2.0, kInf}) {
    INFO("norm_type " << norm_type);
    const double expected = host_norm(params, norm_type);
    const Tensor total = optim::clip_grad_norm_(params, 2 * expected, norm_type);  // clips nothing
    CHECK_THAT(total.item<float>(), WithinRel(expected, 1e-6));
    CHECK(grads_of(params) == before);  // a coefficient of exactly 1 changes no bit
  }
  const double expected = host_norm(params, 1.0);
  optim::clip_grad_norm_(params, 1.0, 1.0);
  const double coefficient = 1.0 / (expected + 1e-6);
  for (size_t t : {size_t{0}, size_t{1}, size_t{1500}, size_t{2999}}) {
    const Values after = params[t].grad().to_vector<double>();
    for (size_t i = 0; i < after.size(); ++i) {
      CHECK_THAT(after[i], WithinAbs(before[t][i] * coefficient, rounding(params[t].dtype()) * std::abs(before[t][i] * coefficient) + 1e-12));
    }
  }
}

TEST_CASE("clip_grad_norm_ of a gradient past float32's exact integers", "[clip_grad]") {
  // 2^24 + 4099 ones: a float32 running sum would stall at 2^24.
  const int64_t count = (int64_t{1} << 24) + 4099;
  Tensor param = zeros({count}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  param.set_grad(ones({count}));
  const Tensor l1 = optim::clip_grad_norm_({param}, 1e12, 1.0);
  CHECK_THAT(l1.item<float>(), WithinRel(static_cast<double>(count), 1e-7));
  const Tensor max_abs = optim::clip_grad_norm_({param}, 1e12, kInf);
  CHECK(max_abs.item<float>() == 1.0f);
  const Tensor l2 = optim::clip_grad_norm_({param}, 1.0);
  CHECK_THAT(l2.item<float>(), WithinRel(std::sqrt(static_cast<double>(count)), 1e-7));
  const double coefficient = 1.0 / (std::sqrt(static_cast<double>(count)) + 1e-6);
  CHECK_THAT(param.grad().view({-1}).narrow(0, 0, 1).item<float>(), WithinRel(coefficient, 1e-6));
  CHECK_THAT(param.grad().view({-1}).narrow(0, count - 1, 1).item<float>(), WithinRel(coefficient, 1e-6));
}

TEST_CASE("clip_grad_norm_ skips empty gradients", "[clip_grad]") {
  Tensor empty_param = zeros({0, 3}, {.category = MemoryCategory::Parameter});
  empty_param.requires_grad_();
  empty_param.set_grad(zeros({0, 3}));
  Tensor param = make_param({0, 0});
  set_grad(param, {3.0, -4.0});
  const Tensor total = optim::clip_grad_norm_({empty_param, param}, 1.0);
  CHECK_THAT(total.item<float>(), WithinRel(5.0, 1e-6));
  CHECK_THAT(param.grad().to_vector<double>()[1], WithinRel(-4.0 / (5.0 + 1e-6), 1e-6));
  CHECK(empty_param.grad().numel() == 0);
  const Tensor only_empty = optim::clip_grad_norm_({empty_param}, 1.0, kInf);
  CHECK(only_empty.item<float>() == 0.0f);
}

TEST_CASE("clip_grad_norm_ clips a non-dense gradient in place", "[clip_grad]") {
  // The transpose of a (2, 3) buffer set as a (3, 2) parameter's gradient.
  Tensor param = zeros({3, 2}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  const Tensor buffer = from_vector(std::vector<float>{3, 0, 0, -4, 0, 0}, {2, 3});
  param.set_grad(buffer.t());
  const Tensor grad = param.grad();
  REQUIRE_FALSE(grad.is_contiguous());
  const uint64_t version = grad.version();
  const Tensor total = optim::clip_grad_norm_({param}, 1.0);
  CHECK_THAT(total.item<float>(), WithinRel(5.0, 1e-6));
  CHECK(param.grad().is_same(grad));
  CHECK(grad.version() > version);
  const Values scaled = buffer.to_vector<double>();  // through the buffer the view shares
  CHECK_THAT(scaled[0], WithinRel(3.0 / (5.0 + 1e-6), 1e-6));
  CHECK_THAT(scaled[3], WithinRel(-4.0 / (5.0 + 1e-6), 1e-6));
}

TEST_CASE("clip_grad_norm_ carries a NaN gradient into the norm", "[clip_grad]") {
  for (double norm_type : {2.0, kInf}) {
    INFO("norm_type " << norm_type);
    Tensor first = make_param({0, 0});
    Tensor second = make_param({0});
    set_grad(first, {std::nan(""), 1.0});
    set_grad(second, {5.0});
    CHECK(std::isnan(optim::clip_grad_norm_({first, second}, 1.0, norm_type).item<float>()));
  }
}

TEST_CASE("clip_grad_value_ clamps every gradient", "[clip_grad]") {
  Tensor param = make_param({0, 0, 0, 0});
  Tensor no_grad = make_param({0});
  set_grad(param, {3.0, -4.0, 0.25, -0.5});
  uint64_t version = param.grad().version();
  optim::clip_grad_value_({param, no_grad}, 0.5);
  REQUIRE(param.grad().to_vector<double>() == Values{0.5, -0.5, 0.25, -0.5});
  REQUIRE(param.grad().version() > version);
  REQUIRE_FALSE(no_grad.grad().defined());
}
