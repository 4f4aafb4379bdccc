// tests/amp/autocast_checks.h — what the CPU and CUDA autocast tests share: a comparison
// loose enough for 16-bit results, relative to the largest expected value.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg_test {

// max |actual - expected| <= tolerance * max |expected| (+1e-6 for all-zero results),
// both read back in float64.
inline void check_close_to_largest(const mg::Tensor& actual, const mg::Tensor& expected, double tolerance) {
  std::vector<double> a = actual.to(mg::DType::Float64).to_vector<double>();
  std::vector<double> b = expected.to(mg::DType::Float64).to_vector<double>();
  REQUIRE(a.size() == b.size());
  double largest = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(b[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  INFO("max |difference| " << worst << ", max |expected| " << largest);
  CHECK(worst <= tolerance * largest + 1e-6);
}

}  // namespace mg_test
