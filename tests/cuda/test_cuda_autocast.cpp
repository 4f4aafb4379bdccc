// tests/cuda/test_cuda_autocast.cpp — autocast on CUDA in float16: products in float16,
// softmax and losses in float32, gradients of float32 master weights close to a float32
// run on the same device, the weight-cast cache counted as AUTOCAST_CACHE and freed after
// the guard, a region's working set cast in one batch with the gradients of casts made
// one at a time, and the parameters' gradients converted back in one batch at backward's
// end as they are at once (the batched kernel itself: test_cuda_convert_each.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "amp/autocast_checks.h"
#include "amp/late_conversion_checks.h"
#include "amp/working_set_checks.h"
#include "cuda/deterministic_convolutions.h"
#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"

using namespace mg;
using amp::AutocastGuard;

namespace {

using mg_test::check_close_to_largest;

// A float32 CUDA leaf that requires grad, from CPU random numbers (fresh, never zeros).
Tensor cuda_parameter(const Shape& sizes, uint64_t seed, double scale = 0.3) {
  Generator generator(seed);
  Tensor values = randn(sizes, {}, &generator).to(Device::cuda());
  values.mul_(scale);
  return values.set_memory_category(MemoryCategory::Parameter).requires_grad_();
}

Tensor cuda_randn(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {}, &generator).to(Device::cuda());
}

}  // namespace

TEST_CASE("cuda autocast runs products in float16 and softmax and losses in float32", "[cuda][autocast]") {
  Tensor x = cuda_randn({8, 16}, 1);
  Tensor weight = cuda_parameter({4, 16}, 2), bias = cuda_parameter({4}, 3);
  Tensor image = cuda_randn({2, 3, 8, 8}, 4);
  Tensor kernel = cuda_parameter({5, 3, 3, 3}, 5);
  Tensor target = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}).to(Device::cuda());

  AutocastGuard autocast(DType::Float16, DeviceType::CUDA);
  Tensor y = linear(x, weight, bias);
  CHECK(y.dtype() == DType::Float16);
  CHECK(matmul(x, weight.t()).dtype() == DType::Float16);
  CHECK(conv2d(image, kernel).dtype() == DType::Float16);
  CHECK(softmax(y, 1).dtype() == DType::Float32);
  CHECK(cross_entropy(y, target).dtype() == DType::Float32);
  CHECK(sum(y).dtype() == DType::Float32);
  // A CPU tensor is not under a CUDA guard.
  CHECK(matmul(x.to(Device::cpu()), x.to(Device::cpu()).t()).dtype() == DType::Float32);
}

TEST_CASE("cuda autocast gradients reach float32 weights close to a float32 run", "[cuda][autocast]") {
  Tensor x = cuda_randn({32, 24}, 6);
  Tensor target = randint(0, 6, {32}, {.dtype = DType::Int64}).to(Device::cuda());
  Tensor w1 = cuda_parameter({40, 24}, 7), b1 = cuda_parameter({40}, 8);
  Tensor w2 = cuda_parameter({6, 40}, 9), b2 = cuda_parameter({6}, 10);
  std::vector<Tensor> params{w1, b1, w2, b2};
  auto gradients = [&](bool enabled) {
    for (const Tensor& p : params) p.set_grad(Tensor());
    Tensor loss;
    {
      AutocastGuard autocast(DType::Float16, DeviceType::CUDA, enabled);
      loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), target);
    }
    loss.backward();
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    return grads;
  };
  std::vector<Tensor> reference = gradients(false), mixed = gradients(true);
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(mixed[i].dtype() == DType::Float32);
    check_close_to_largest(mixed[i], reference[i], 0.01);  // float16 keeps 11 bits
  }
}

TEST_CASE("cuda autocast casts a twice-used weight once and frees the copy after the guard", "[cuda][autocast]") {
  Tensor x = cuda_randn({4, 128}, 11);
  Tensor weight = cuda_parameter({128, 128}, 12);
  auto cache_bytes = [] { return memory::snapshot(Device::cuda()).category(MemoryCategory::AutocastCache).current; };
  const int64_t before = cache_bytes();
  {
    AutocastGuard autocast(DType::Float16, DeviceType::CUDA);
    Tensor y = linear(linear(x, weight), weight);
    CHECK(amp::autocast_cache_size() == 1);
    CHECK(cache_bytes() - before == weight.numel() * 2);
  }
  CHECK(amp::autocast_cache_size() == 0);
  CHECK(cache_bytes() == before);
}

TEST_CASE("cuda autocast casts a region's working set in one batch, with the gradients of casts one at a time",
          "[cuda][autocast][working_set]") {
  // Both paths must run the same convolution engines to give the same bits.
  const mg_test::DeterministicConvolutions deterministic;
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    INFO(dtype);
    mg_test::check_working_set_steps(13, Device::cuda(), dtype);
  }
}

TEST_CASE("cuda autocast's parameters convert their gradients at backward's end, as at once",
          "[cuda][autocast][late_conversion]") {
  const mg_test::DeterministicConvolutions deterministic;
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    INFO(dtype);
    mg_test::check_late_conversion(17, Device::cuda(), dtype);
  }
}
