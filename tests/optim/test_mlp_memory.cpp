// tests/optim/test_mlp_memory.cpp — the memory report agrees with arithmetic for the
// MNIST MLP (784-512-256-10) trained one step with Adam.
#include <catch2/catch.hpp>

#include "memgrad/memgrad.h"

using namespace mg;

namespace {

constexpr int64_t kParameters = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10;  // 535,818
constexpr int64_t kFloatBytes = 4;

int64_t bytes(MemoryCategory category) { return memory::snapshot(Device::cpu()).category(category).current; }

}  // namespace

TEST_CASE("after one Adam step the MLP's memory is exactly parameters, gradients and two moments",
          "[mlp_memory]") {
  REQUIRE(kParameters == 535818);
  int64_t parameter_before = bytes(MemoryCategory::Parameter);
  int64_t gradient_before = bytes(MemoryCategory::Gradient);
  int64_t state_before = bytes(MemoryCategory::OptimizerState);
  int64_t activation_before = bytes(MemoryCategory::Activation);

  Generator generator(0);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 512, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 256, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10, true, &generator)});
  REQUIRE(model->num_parameters() == kParameters);
  optim::Adam optimizer(model->parameters(), {.lr = 1e-3});

  Tensor inputs = randn({128, 784}, {.category = MemoryCategory::Input}, &generator);
  Tensor targets = randint(0, 10, {128}, {.dtype = DType::Int64, .category = MemoryCategory::Input}, &generator);
  optimizer.zero_grad();
  Tensor loss = cross_entropy((*model)(inputs), targets);
  CHECK(bytes(MemoryCategory::Activation) > activation_before);
  loss.backward();
  optimizer.step();

  CHECK(bytes(MemoryCategory::Parameter) - parameter_before == kParameters * kFloatBytes);
  CHECK(bytes(MemoryCategory::Gradient) - gradient_before == kParameters * kFloatBytes);
  // exp_avg and exp_avg_sq per parameter, plus one float32 step counter per parameter tensor.
  CHECK(bytes(MemoryCategory::OptimizerState) - state_before == 2 * kParameters * kFloatBytes + 6 * kFloatBytes);
  CHECK(bytes(MemoryCategory::Activation) == activation_before);

  optimizer.zero_grad();  // set to none: the gradient bytes are returned
  CHECK(bytes(MemoryCategory::Gradient) == gradient_before);
}
