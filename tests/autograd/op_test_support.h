// tests/autograd/op_test_support.h — what the autograd op tests share: seeded float64
// values and leaves, tensors counting 0, 1, 2, ..., a gradcheck that reports its message when it fails,
// and the bytes allocated on the CPU (to show that views allocate nothing).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <vector>

#include "memgrad/autograd/gradcheck.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"

namespace mg_test {

// Standard normal float64 values from `seed`.
inline mg::Tensor normal(const mg::Shape& sizes, uint64_t seed, bool requires_grad = false) {
  mg::Generator generator(seed);
  return mg::randn(sizes, {.dtype = mg::DType::Float64, .requires_grad = requires_grad}, &generator);
}

// The same, requiring grad.
inline mg::Tensor leaf(const mg::Shape& sizes, uint64_t seed) { return normal(sizes, seed, /*requires_grad=*/true); }

// 0, 1, 2, ... as float64, viewed as `sizes`.
inline mg::Tensor counting(const mg::Shape& sizes) {
  return mg::arange(static_cast<double>(sizes.numel()), {.dtype = mg::DType::Float64}).view(sizes);
}

// fn's gradients against central finite differences (autograd/gradcheck.h).
inline void check_gradients(const std::function<mg::Tensor(const std::vector<mg::Tensor>&)>& fn,
                            const std::vector<mg::Tensor>& inputs) {
  mg::GradcheckResult result = mg::gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

inline int64_t cpu_allocated_bytes() {
  return mg::allocator_for(mg::Device::cpu()).stats().allocated_bytes.current;
}

}  // namespace mg_test
