// tests/amp/test_late_gradient_conversion.cpp — autocast's parameters take their 16-bit
// gradients unconverted and convert them all at backward's end (autograd/accumulate_grad.h),
// with the values, dtype, layout and memory category of a conversion at once; watched
// parameters (hooks) and checkpoint's recomputation convert at once.
#include <catch2/catch.hpp>

#include "amp/late_conversion_checks.h"
#include "memgrad/memgrad.h"

using namespace mg;

TEST_CASE("autocast's parameters convert their gradients at backward's end, as at once", "[autocast][late_conversion]") {
  mg_test::check_late_conversion(41, Device::cpu(), DType::BFloat16);
  mg_test::check_late_conversion(43, Device::cpu(), DType::Float16);
}

TEST_CASE("a parameter's register_hook sees its gradient converted, and .grad is filled at once",
          "[autocast][late_conversion]") {
  Generator generator(7);
  const Tensor w = mg_test::working_set_parameter({6, 4}, generator, Device::cpu());
  const Tensor x = randn({3, 4}, {}, &generator);
  DType seen = DType::Int64;
  w.register_hook([&](const Tensor& grad) {
    seen = grad.dtype();
    return Tensor();
  });
  Tensor loss;
  {
    amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    loss = sum(linear(x, w));
  }
  bool defined_before_end = false;
  loss.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] { defined_before_end = w.grad().defined(); });
    return Tensor();
  });
  loss.backward();
  CHECK(seen == DType::Float32);
  CHECK(defined_before_end);
  CHECK(w.grad().dtype() == DType::Float32);
}

TEST_CASE("checkpoint's recomputation converts its parameters' gradients at once", "[autocast][late_conversion][checkpoint]") {
  Generator generator(11);
  const Tensor w = mg_test::working_set_parameter({8, 8}, generator, Device::cpu());
  const Tensor reference = w.detach().clone().requires_grad_();
  reference.register_post_accumulate_grad_hook([](const Tensor&) {});
  const Tensor x = mul(randn({4, 8}, {}, &generator).requires_grad_(), 2.0);
  auto run = [&](const Tensor& weight) {
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
      loss = sum(checkpoint([&](const Tensor& input) { return relu(linear(input, weight)); }, x));
    }
    loss.backward();
    return weight.grad().to_vector<float>();
  };
  CHECK(run(w) == run(reference));
  CHECK(w.grad().dtype() == DType::Float32);
}
