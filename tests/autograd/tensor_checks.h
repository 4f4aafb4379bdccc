// tests/autograd/tensor_checks.h — what autograd and nn tests share: the message of an
// expected mg::Error, and the largest elementwise difference of two tensors.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/tensor.h"

namespace mg_test {

// The message of the mg::Error `fn` throws, or "no error".
inline std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const mg::Error& error) {
    return error.what();
  }
  return "no error";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// max |a - b| over the elements of two tensors of the same shape (compared in float64).
inline double max_abs_difference(const mg::Tensor& a, const mg::Tensor& b) {
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  REQUIRE(a.sizes() == b.sizes());
  std::vector<double> left = a.to(mg::DType::Float64).to_vector<double>();
  std::vector<double> right = b.to(mg::DType::Float64).to_vector<double>();
  double largest = 0.0;
  for (size_t i = 0; i < left.size(); ++i) largest = std::max(largest, std::abs(left[i] - right[i]));
  return largest;
}

}  // namespace mg_test
