// tests/distributed/test_zero_step_skipping.cpp — ZeroRedundancyOptimizer under a GradScaler's
// flag (Optimizer::step_skipping_if), in one process: the flag goes to the shard optimizer,
// whose fused kernels skip on the device, so a flagged step leaves parameters and state
// alone and an unflagged one equals plain AdamW's.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/distributed/single_process_group.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"
#include "memgrad/optim/adam.h"

using namespace mg;

namespace {

std::vector<Tensor> parameters(uint64_t seed) {
  Generator generator(seed);
  return {randn({5, 3}, {.dtype = DType::Float64}, &generator).requires_grad_(),
          randn({7}, {.dtype = DType::Float64}, &generator).requires_grad_()};
}

void give_gradients(const std::vector<Tensor>& params) {
  Generator generator(9);
  for (const Tensor& param : params) param.set_grad(randn(param.sizes(), {.dtype = DType::Float64}, &generator));
}

}  // namespace

TEST_CASE("ZeRO-1 hands a GradScaler's flag to its shard optimizer: a flagged step changes nothing",
          "[distributed][zero]") {
  const optim::AdamWOptions options{.lr = 0.1, .weight_decay = 0.1};
  const std::vector<Tensor> plain = parameters(3), sharded = parameters(3);
  optim::AdamW plain_optimizer(plain, options);
  auto zero = distributed::make_zero_redundancy_optimizer<optim::AdamW>(
      std::make_shared<distributed::SingleProcessGroup>(Device::cpu()), sharded, options);

  const Tensor overflow = full({1}, 1.0, {.dtype = DType::Float32});
  const Tensor no_overflow = zeros({1}, {.dtype = DType::Float32});
  give_gradients(sharded);
  const std::vector<double> before = sharded[0].to_vector<double>();
  zero->step_skipping_if(overflow);
  CHECK(sharded[0].to_vector<double>() == before);

  for (int step = 0; step < 3; ++step) {
    give_gradients(plain);
    give_gradients(sharded);
    plain_optimizer.step_skipping_if(no_overflow);
    zero->step_skipping_if(no_overflow);
  }
  for (size_t i = 0; i < plain.size(); ++i) {
    const std::vector<double> expected = plain[i].to_vector<double>(), actual = sharded[i].to_vector<double>();
    REQUIRE(expected.size() == actual.size());
    for (size_t j = 0; j < expected.size(); ++j) CHECK(actual[j] == Approx(expected[j]).epsilon(1e-12));
  }
}
