// tests/cuda/kernel_checks.h — what the CUDA-vs-CPU kernel tests share: fresh random
// inputs (never zeros), values read back through the CPU, and element-by-element
// comparison with a relative tolerance that reports the first mismatch (or, for
// reductions, against the result's largest value); the same values in the same layout
// (contiguous, transposed, strided, offset) on both devices.
//
// Tolerance: |cuda - cpu| <= rtol * max(|cpu|, 1), with rtol 1e-6 for float32 and 1e-12
// for float64 (the GPU's math functions differ from glibc's by a few ulps, and either
// compiler may fuse a multiply-add); about one unit in the last place for float16 /
// bfloat16; exact for integers, bools, conversions, masks and uniform random numbers.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/memgrad.h"
#include "ops/every_op.h"

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

// Every value within `relative` of the largest |value| of the CPU result (at least 1): for
// results summed over many terms (normalisations, gradients accumulated over rows), whose
// rounding error scales with the largest values rather than with each element.
inline void check_within_scale(const Tensor& cuda_result, const Tensor& cpu_result, double relative,
                               const std::string& what = "") {
  INFO(what);
  REQUIRE(cuda_result.device().is_cuda());
  REQUIRE(cuda_result.sizes() == cpu_result.sizes());
  REQUIRE(cuda_result.dtype() == cpu_result.dtype());
  std::vector<double> got = host_values(cuda_result), expected = host_values(cpu_result);
  double scale = 1.0;
  for (double value : expected) scale = std::max(scale, std::abs(value));
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
  INFO("largest difference " << worst << " against scale " << scale);
  CHECK(worst <= relative * scale);
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

// Fresh normal values offset + scale * n of `dtype` on the CPU (n standard normal, drawn in
// float64 from `seed`, then converted): shifted and widened inputs for the normalisations.
inline Tensor random_normal(const Shape& sizes, DType dtype, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  Generator generator(seed);
  std::vector<double> values = randn(sizes, {.dtype = DType::Float64}, &generator).to_vector<double>();
  for (double& value : values) value = value * scale + offset;
  return converted_copy(from_vector<double>(values, sizes), dtype, Device::cpu());
}

// The view kinds, and how a view is cut from its base buffer: the every-op loop's.
using every_op::base_sizes;
using every_op::Layout;
using every_op::layout_name;
using every_op::view_of;

// The same values in the same layout on both devices: a view of a base buffer (random
// values too, so elements outside the view are checked to stay untouched).
struct Pair {
  Tensor cpu, cuda;            // the views
  Tensor cpu_base, cuda_base;  // their buffers
};

inline Pair random_pair(const Shape& sizes, DType dtype, uint64_t seed, Layout layout = Layout::Contiguous,
                 Values kind = Values::Normal) {
  REQUIRE(every_op::fits(sizes, layout));
  Pair pair;
  pair.cpu_base = random_values(base_sizes(sizes, layout), dtype, seed, kind);
  pair.cuda_base = pair.cpu_base.to(kCuda);
  pair.cpu = view_of(pair.cpu_base, sizes, layout);
  pair.cuda = view_of(pair.cuda_base, sizes, layout);
  REQUIRE(pair.cpu.sizes() == sizes);
  REQUIRE(pair.cuda.strides() == pair.cpu.strides());
  return pair;
}

// The message of the mg::Error that `fn` throws, or "no error" (for checks of what a
// device-side error report says, found at the next synchronisation).
inline std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace cuda_checks
