// tests/memory/test_step_cost.cpp — memory/step_cost.h: the simulated kernels report their
// work (core/kernel_work.h) and a StepCostMeter turns it into time on a device's rates.
#include <catch2/catch.hpp>

#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/memory/step_cost.h"

using namespace mg;

namespace {

const Device kSimulated = Device::simulated(5);

// Rates that make the arithmetic easy to follow.
memory::DeviceRates round_rates() {
  return {.matrix_16bit_flops_per_s = 1e12,
          .matrix_tf32_flops_per_s = 0.5e12,
          .matrix_float32_flops_per_s = 0.25e12,
          .channels_first_slowdown_16bit = 3,
          .channels_first_slowdown_float32 = 2,
          .vector_operations_per_s = 1e12,
          .memory_bytes_per_s = 1e9,
          .shortest_kernel_s = 1e-6,
          .launch_gap_s = 0.5e-6,
          .issue_s = 2e-6,
          .host_link_bytes_per_s = 1e8,
          .host_adam_s_per_element = 1e-9};
}

}  // namespace

TEST_CASE("a simulated matmul reports 2 M N K FLOPs and its tensors' bytes, costed by its roofline",
          "[memory][step_cost]") {
  const Tensor a = empty({64, 128}, {.dtype = DType::BFloat16, .device = kSimulated});
  const Tensor b = empty({128, 32}, {.dtype = DType::BFloat16, .device = kSimulated});
  memory::StepCostMeter meter(round_rates());
  const Tensor c = matmul(a, b);
  const memory::StepCost& cost = meter.cost();
  CHECK(cost.kernel_calls == 1);
  CHECK(cost.flops == 2.0 * 64 * 32 * 128);
  CHECK(cost.bytes == 2.0 * (64 * 128 + 128 * 32 + 64 * 32));
  // bytes / memory rate (28,672 / 1e9 s) beats FLOPs / 16-bit rate (524,288 / 1e12 s); then
  // the launch gap.
  CHECK(cost.device_seconds == Approx(28'672 / 1e9 + 0.5e-6));
  CHECK(cost.host_seconds == Approx(2e-6));
  CHECK(cost.seconds() == Approx(28'672 / 1e9 + 0.5e-6));
}

TEST_CASE("a simulated causal attention forward reports half of 4 B H T T D FLOPs", "[memory][step_cost]") {
  const TensorOptions options{.dtype = DType::BFloat16, .device = kSimulated};
  const Tensor q = empty({2, 3, 256, 64}, options), k = empty({2, 3, 256, 64}, options),
               v = empty({2, 3, 256, 64}, options);
  memory::StepCostMeter meter(round_rates());
  scaled_dot_product_attention(q, k, v, {.is_causal = true, .backend = AttentionBackend::Fused});
  CHECK(meter.cost().flops == 4.0 * 2 * 3 * 256 * 256 * 64 / 2);
}

TEST_CASE("a meter nested in another takes the calls while it lives, then restores the one before it",
          "[memory][step_cost]") {
  const Tensor a = empty({8, 8}, {.device = kSimulated});
  memory::StepCostMeter outer(round_rates());
  {
    memory::StepCostMeter inner(round_rates());
    matmul(a, a);
    CHECK(inner.cost().kernel_calls == 1);
  }
  CHECK(outer.cost().kernel_calls == 0);
  matmul(a, a);
  CHECK(outer.cost().kernel_calls == 1);
  // float32 products run at the float32 rate: 2 x 8^3 FLOPs / 0.25e12, under the floor;
  // then the launch gap.
  CHECK(outer.cost().device_seconds == Approx(1e-6 + 0.5e-6));
}

TEST_CASE("an offloaded update: host update and both copies, or with the delay what exceeds the step",
          "[memory][step_cost]") {
  const memory::DeviceRates rates = round_rates();
  // 1e6 elements: update 1 ms; 4e6 bytes each way at 1e8 B/s: 80 ms of copies.
  CHECK(memory::offloaded_update_seconds(rates, 1'000'000, 4e6, false, 0.5e-3) == Approx(81e-3));
  CHECK(memory::offloaded_update_seconds(rates, 1'000'000, 4e6, true, 0.5e-3) == Approx(0.5e-3 + 40e-3));
  CHECK(memory::offloaded_update_seconds(rates, 1'000'000, 4e6, true, 2e-3) == Approx(40e-3));
}
