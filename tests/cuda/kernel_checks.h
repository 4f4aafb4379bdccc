// tests/cuda/kernel_checks.h — what the CUDA-vs-CPU kernel tests share: fresh random
// inputs (never zeros), values read back through the CPU, and element-by-element
// comparison with a relative tolerance that reports the first mismatch.
//
// Tolerance: |cuda - cpu| <= rtol * max(|cpu|, 1), with rtol 1e-6 for float32 and 1e-12
// for float64 (the GPU's math functions differ from glibc's by a few ulps, and either
// compiler may fuse a multiply-add); about one unit in the last place for float16 /
// bfloat16; exact for integers, bools, conversions, masks and uniform random numbers.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad.h"

namespace cuda_checks {

using namespace mg;

inline const Device kCuda = Device::cuda();

inline const KernelTable& cpu_kernels() { return kernels(Device::cpu()); }
inline const KernelTable& gpu_kernels() { return kernels(kCuda); }

inline constexpr DType kFloatTypes[] = {DType::Float32, DType::Float64};
inline constexpr DType kHalfTypes[] = {DType::Float16, DType::BFloat16};
inline constexpr DType kIntegerTypes[] = {DType::Int64, DType::Int32, DType::UInt8, DType::Bool};
inline constexpr DType kAllTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                      DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 1e-6;
    case DType::Float64: return 1e-12;
    case DType::Float16: return 2e-3;    // 2^-10 relative is one ulp
    case DType::BFloat16: return 1.6e-2;  // 2^-7
    default: return 0.0;
  }
}

inline bool is_integral(DType dtype) { return !is_floating(dtype); }

// The values of a tensor on either device, converted to double on the host (the
// conversion runs on the CPU, so it does not depend on the kernels under test).
inline std::vector<double> host_values(const Tensor& tensor) {
  Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
  return converted_copy(host, DType::Float64, Device::cpu()).to_vector<double>();
}

// |actual - expected| <= rtol * max(|expected|, 1) everywhere (NaN matches NaN).
inline void check_close(const Tensor& actual, const Tensor& expected, double rtol, const std::string& what) {
  INFO(what);
  REQUIRE(actual.sizes() == expected.sizes());
  REQUIRE(actual.dtype() == expected.dtype());
  std::vector<double> a = host_values(actual);
  std::vector<double> e = host_values(expected);
  int64_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i])) ||
                std::abs(a[i] - e[i]) <= rtol * std::max(std::abs(e[i]), 1.0);
    if (!same && mismatches++ == 0) first = i;
  }
  std::ostringstream detail;
  if (mismatches > 0) {
    detail << std::setprecision(17) << mismatches << " of " << a.size() << " elements differ; first at " << first
           << ": cuda " << a[first] << " vs cpu " << e[first];
  }
  INFO(detail.str());
  CHECK(mismatches == 0);
}

inline void check_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  check_close(actual, expected, 0.0, what);
}

// What kind of random values a test needs.
enum class Values {
  Normal,         // floating: standard normal; integers: trunc(10 n)
  Positive,       // floating: 0.5 + |n| (safe for log, sqrt, fractional powers); integers: 1 + trunc(5 |n|)
  SmallIntegers,  // trunc(2.5 n): many ties, for comparisons, maximum and minimum
};

// Fresh random values of `dtype` on the CPU (drawn in float64 from `seed`, then converted).
inline Tensor random_values(const Shape& sizes, DType dtype, uint64_t seed, Values kind = Values::Normal) {
  Generator generator(seed);
  std::vector<double> values =
      randn(sizes.empty() ? Shape{1} : sizes, {.dtype = DType::Float64}, &generator).to_vector<double>();
  for (double& value : values) {
    switch (kind) {
      case Values::Normal: value = is_integral(dtype) ? std::trunc(10 * value) : value; break;
      case Values::Positive: value = is_integral(dtype) ? 1 + std::trunc(5 * std::abs(value)) : 0.5 + std::abs(value); break;
      case Values::SmallIntegers: value = std::trunc(2.5 * value); break;
    }
  }
  if (sizes.empty()) return full({}, values[0], {.dtype = dtype});
  return converted_copy(from_vector(values, sizes), dtype, Device::cpu());
}

}  // namespace cuda_checks
