// tests/nn/test_checkpoint_resnet.cpp — gradient checkpointing with modules:
// checkpoint_sequential and ResNetOptions::checkpoint_stages give the gradients and the
// batch-norm running statistics of the unchecked run, and the ResNet's activation peak
// falls by more than half.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using mg_test::max_abs_difference;

// Every parameter's gradient and every buffer (running statistics, counters) agree.
void check_same_state(const nn::Module& plain, const nn::Module& checked, double tolerance) {
  nn::NamedTensors plain_parameters = plain.named_parameters(), checked_parameters = checked.named_parameters();
  REQUIRE(plain_parameters.size() == checked_parameters.size());
  for (size_t i = 0; i < plain_parameters.size(); ++i) {
    INFO("gradient of " << plain_parameters[i].first);
    CHECK(max_abs_difference(plain_parameters[i].second.grad(), checked_parameters[i].second.grad()) <= tolerance);
  }
  nn::NamedTensors plain_buffers = plain.named_buffers(), checked_buffers = checked.named_buffers();
  REQUIRE(plain_buffers.size() == checked_buffers.size());
  for (size_t i = 0; i < plain_buffers.size(); ++i) {
    INFO("buffer " << plain_buffers[i].first);
    CHECK(max_abs_difference(plain_buffers[i].second, checked_buffers[i].second) == 0.0);
  }
}

// Conv-BN-ReLU twice, then Dropout and a linear head: batch norm and dropout are what a
// recompute could get wrong.
std::shared_ptr<nn::Sequential> small_cnn(uint64_t seed) {
  Generator generator(seed);
  Conv2dOptions same;
  same.padding = {1, 1};
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(3, 8, 3, same, true, &generator), std::make_shared<nn::BatchNorm2d>(8),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Conv2d>(8, 8, 3, same, true, &generator),
      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.3),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8 * 6 * 6, 5, true, &generator));
}

int64_t activation_peak_of_step(nn::Module& model, const Tensor& input, const Tensor& target) {
  int64_t before = memory::snapshot().category(MemoryCategory::Activation).current;
  memory::reset_peak_stats();
  cross_entropy(model(input), target).backward();
  return memory::snapshot().category(MemoryCategory::Activation).peak - before;
}

}  // namespace

TEST_CASE("checkpoint_sequential gives the gradients and running statistics of the unchecked run",
          "[checkpoint_resnet]") {
  Generator data(1);
  Tensor input = randn({4, 3, 6, 6}, {}, &data);
  Tensor target = randint(0, 5, {4}, {.dtype = DType::Int64}, &data);
  auto plain = small_cnn(2);
  manual_seed(11);
  cross_entropy((*plain)(input), target).backward();
  uint64_t offset_plain = default_generator().state().offset;

  for (int segments : {1, 2, 3, 9}) {
    INFO("segments=" << segments);
    auto checked = small_cnn(2);
    manual_seed(11);
    cross_entropy(nn::checkpoint_sequential(*checked, segments, input), target).backward();
    CHECK(default_generator().state().offset == offset_plain);
    check_same_state(*plain, *checked, 1e-6);
  }
}

TEST_CASE("checkpoint_sequential works on a Sequential that no shared_ptr holds", "[checkpoint_resnet]") {
  Generator generator(3);
  nn::Sequential on_stack{std::make_shared<nn::Linear>(6, 5, true, &generator), std::make_shared<nn::ReLU>(),
                          std::make_shared<nn::Linear>(5, 4, true, &generator)};
  Tensor x_plain = randn({3, 6}, {}, &generator).requires_grad_();
  Tensor x_checked = x_plain.detach().requires_grad_();
  sum(on_stack(x_plain)).backward();
  std::vector<Tensor> plain_grads;
  for (const Tensor& parameter : on_stack.parameters()) plain_grads.push_back(parameter.grad().clone());
  on_stack.zero_grad();
  Tensor y = nn::checkpoint_sequential(on_stack, 3, x_checked);
  REQUIRE(y.grad_fn() != nullptr);
  sum(y).backward();
  CHECK(max_abs_difference(x_plain.grad(), x_checked.grad()) < 1e-6);
  std::vector<Tensor> parameters = on_stack.parameters();
  for (size_t i = 0; i < parameters.size(); ++i) CHECK(max_abs_difference(plain_grads[i], parameters[i].grad()) < 1e-6);
}

TEST_CASE("checkpoint_sequential rejects a segment count it cannot honour", "[checkpoint_resnet]") {
  auto model = small_cnn(2);
  Tensor input = randn({4, 3, 6, 6});
  for (int segments : {0, 10}) {
    try {
      nn::checkpoint_sequential(*model, segments, input);
      FAIL("no error for segments=" << segments);
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("between 1 and the number of modules") != std::string::npos);
    }
  }
}

TEST_CASE("a ResNet with checkpoint_stages matches the unchecked one and more than halves its activation peak",
          "[checkpoint_resnet]") {
  // NOTE: resnet34's stage depths ({3, 4, 6, 3} basic blocks) with the small-image stem.
  // Checkpointing every stage leaves the peak at the stem's activations plus the largest
  // stage's (layer1, at full resolution); resnet18's two-block stages make layer1 nearly
  // half of all activations, deeper stages show the trade as it is used.
  auto make = [](bool checkpoint_stages) {
    Generator generator(5);
    return std::make_shared<nn::ResNet>(nn::ResNetBlock::Basic, std::array<int64_t, 4>{3, 4, 6, 3},
                                        nn::ResNetOptions{.num_classes = 10,
                                                          .small_image_stem = true,
                                                          .generator = &generator,
                                                          .checkpoint_stages = checkpoint_stages
                                                                                   ? nn::BlockCheckpoint::Whole
                                                                                   : nn::BlockCheckpoint::None});
  };
  Generator data(6);
  Tensor input = randn({8, 3, 32, 32}, {.category = MemoryCategory::Input}, &data);
  Tensor target = randint(0, 10, {8}, {.dtype = DType::Int64, .category = MemoryCategory::Input}, &data);

  auto plain = make(false);
  int64_t plain_peak = activation_peak_of_step(*plain, input, target);
  auto checked = make(true);
  int64_t checked_peak = activation_peak_of_step(*checked, input, target);

  INFO("ACTIVATION peak: " << plain_peak << " bytes unchecked, " << checked_peak << " bytes with checkpoint_stages ("
                           << 100.0 * (plain_peak - checked_peak) / plain_peak << "% lower)");
  CHECK(checked_peak * 2 <= plain_peak);
  check_same_state(*plain, *checked, 1e-5);
}
