// tests/cuda/test_cuda_captured_step.cpp — whole training steps captured as CUDA graphs
// (cuda/captured_step.h): N replays leave the parameters bit for bit where N eager steps
// leave them (an MLP with Adam, the MNIST CNN with AdamW, convolutions with batch norm and
// SGD with momentum, ResNet-18 in float32 and under float16 autocast, AdamW under a
// learning-rate schedule), allocations between replays never land on the graph's memory,
// and what a capture cannot hold is an mg::Error naming it, after which eager work goes on.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <memory>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/captured_step.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"
#include "cuda/deterministic_convolutions.h"
#include "cuda/kernel_checks.h"

using namespace mg;
using namespace cuda_checks;

namespace {

constexpr int kWarmupSteps = 3;
constexpr int kReplays = 5;

// One model, its optimizer and the step's static inputs on the GPU.
struct Trainer {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  Tensor input, target, loss;
  std::optional<DType> autocast;  // the forward under autocast to this dtype

  void step() {
    optimizer->zero_grad();
    {
      std::optional<amp::AutocastGuard> mixed;
      if (autocast) mixed.emplace(*autocast);
      loss = cross_entropy((*model)(input), target);
    }
    loss.backward();
    optimizer->step();
  }
};

using MakeTrainer = std::function<Trainer()>;

// Batches as the data loader would give them: host tensors, a new one every step.
std::vector<std::pair<Tensor, Tensor>> host_batches(const Shape& input_shape, int count) {
  Generator generator(77);
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < count; ++i) {
    batches.emplace_back(randn(input_shape, {}, &generator),
                         randint(0, 10, {input_shape[0]}, {.dtype = DType::Int64}, &generator));
  }
  return batches;
}

void load(Trainer& trainer, const std::pair<Tensor, Tensor>& batch) {
  trainer.input.copy_(batch.first.to(kCuda));
  trainer.target.copy_(batch.second.to(kCuda));
}

void check_same_parameters_and_buffers(const Trainer& actual, const Trainer& expected, const std::string& what) {
  check_equal(actual.loss, expected.loss, what + ": the last step's loss");
  const std::vector<Tensor> expected_parameters = expected.model->parameters(),
                            actual_parameters = actual.model->parameters();
  REQUIRE(expected_parameters.size() == actual_parameters.size());
  for (size_t i = 0; i < expected_parameters.size(); ++i) {
    check_equal(actual_parameters[i], expected_parameters[i], what + ": parameter " + std::to_string(i));
  }
  const std::vector<Tensor> expected_buffers = expected.model->buffers(), actual_buffers = actual.model->buffers();
  REQUIRE(expected_buffers.size() == actual_buffers.size());
  for (size_t i = 0; i < expected_buffers.size(); ++i) {
    check_equal(actual_buffers[i], expected_buffers[i], what + ": buffer " + std::to_string(i));
  }
}

void train_eagerly(Trainer& trainer, const std::vector<std::pair<Tensor, Tensor>>& batches) {
  load(trainer, batches[0]);
  for (int i = 0; i < kWarmupSteps; ++i) trainer.step();
  for (int i = 1; i <= kReplays; ++i) {
    load(trainer, batches[i]);
    trainer.step();
  }
}

// Trains one model eagerly and one through a CapturedStep on the same batches; the
// warm-up steps of both see the first batch. A second eager run first shows that eager
// steps themselves repeat bit for bit, so a difference is the graph's.
void check_replays_match_eager(const MakeTrainer& make, const Shape& input_shape) {
  mg_test::DeterministicConvolutions deterministic;
  const auto batches = host_batches(input_shape, kReplays + 1);
  constexpr uint64_t kSeed = 1234;  // every run draws the same dropout masks
  Trainer eager = make(), eager_again = make(), captured = make();
  manual_seed(kSeed);
  train_eagerly(eager, batches);
  manual_seed(kSeed);
  train_eagerly(eager_again, batches);
  check_same_parameters_and_buffers(eager_again, eager, "two eager runs");

  manual_seed(kSeed);
  load(captured, batches[0]);
  cuda::CapturedStep step([&] { captured.step(); }, {.warmup_steps = kWarmupSteps});
  CHECK(step.pool_bytes() > 0);
  for (int i = 1; i <= kReplays; ++i) {
    load(captured, batches[i]);
    step.replay();
  }
  CHECK(step.replays() == kReplays);
  check_same_parameters_and_buffers(captured, eager, "replays against eager steps");
}

Trainer mlp_with_adam() {
  Generator generator(1);
  Trainer trainer;
  trainer.model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 256, true, &generator),
                                                   std::make_shared<nn::ReLU>(),
                                                   std::make_shared<nn::Linear>(256, 10, true, &generator));
  trainer.model->to(kCuda);
  trainer.optimizer = std::make_unique<optim::Adam>(trainer.model->parameters(), optim::AdamOptions{.lr = 1e-3});
  trainer.input = zeros({64, 784}, {.device = kCuda});
  trainer.target = zeros({64}, {.dtype = DType::Int64, .device = kCuda});
  return trainer;
}

}  // namespace

TEST_CASE("CapturedStep: replays of an MLP's Adam step equal eager steps bit for bit", "[cuda][graph]") {
  check_replays_match_eager(mlp_with_adam, {64, 784});
}

TEST_CASE("CapturedStep: replays of the MNIST CNN's AdamW step, dropout included, equal eager steps bit for bit",
          "[cuda][graph]") {
  check_replays_match_eager(
      [] {
        Generator generator(2);
        Trainer trainer;
        trainer.model = std::make_shared<nn::MnistCnn>(Shape{28, 28}, 10, &generator);
        trainer.model->to(kCuda);
        trainer.optimizer = std::make_unique<optim::AdamW>(trainer.model->parameters(), optim::AdamWOptions{});
        trainer.input = zeros({32, 1, 28, 28}, {.device = kCuda});
        trainer.target = zeros({32}, {.dtype = DType::Int64, .device = kCuda});
        return trainer;
      },
      {32, 1, 28, 28});
}

TEST_CASE("CapturedStep: replays with batch norm and SGD momentum equal eager steps, running statistics too",
          "[cuda][graph]") {
  check_replays_match_eager(
      [] {
        Generator generator(3);
        Trainer trainer;
        trainer.model = std::make_shared<nn::Sequential>(
            std::make_shared<nn::Conv2d>(3, 16, 3, Conv2dOptions{.padding = {1, 1}}, false, &generator),
            std::make_shared<nn::BatchNorm2d>(16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
            std::make_shared<nn::Linear>(16 * 8 * 8, 10, true, &generator));
        trainer.model->to(kCuda);
        trainer.optimizer = std::make_unique<optim::SGD>(trainer.model->parameters(),
                                                         optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
        trainer.input = zeros({16, 3, 8, 8}, {.device = kCuda});
        trainer.target = zeros({16}, {.dtype = DType::Int64, .device = kCuda});
        return trainer;
      },
      {16, 3, 8, 8});
}

TEST_CASE("CapturedStep: replays of ResNet-18's step equal eager steps, in float32 and under float16 autocast",
          "[cuda][graph]") {
  // channels_last under float16 autocast is the path of ResNet's fused kernels: batch norm's
  // statistics generated by the convolutions (set_cudnn_fusion) and batch norm + residual
  // add + ReLU in one op; float32 NCHW runs the latter only.
  const bool mixed = GENERATE(false, true);
  INFO((mixed ? "float16 autocast, channels_last" : "float32, NCHW"));
  check_replays_match_eager(
      [mixed] {
        Generator generator(5);
        Trainer trainer;
        trainer.model = nn::resnet18({.num_classes = 10, .small_image_stem = true, .generator = &generator});
        trainer.model->to(kCuda);
        const MemoryFormat layout = mixed ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
        trainer.model->to(layout);
        trainer.optimizer = std::make_unique<optim::SGD>(
            trainer.model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
        trainer.input = empty({8, 3, 16, 16}, {.device = kCuda}, layout);  // each step loads a batch
        trainer.target = zeros({8}, {.dtype = DType::Int64, .device = kCuda});
        if (mixed) trainer.autocast = DType::Float16;
        return trainer;
      },
      {8, 3, 16, 16});
}

TEST_CASE("CapturedStep: a scheduler's learning rates reach the replays, bit for bit as in eager AdamW steps",
          "[cuda][graph]") {
  const auto batches = host_batches({64, 784}, kReplays + 1);
  auto adamw_trainer = [] {
    Trainer trainer = mlp_with_adam();
    trainer.optimizer = std::make_unique<optim::AdamW>(trainer.model->parameters(),
                                                       optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.1});
    return trainer;
  };
  Trainer eager = adamw_trainer(), captured = adamw_trainer();
  optim::StepLR eager_schedule(*eager.optimizer, /*step_size=*/1, /*gamma=*/0.5);
  optim::StepLR captured_schedule(*captured.optimizer, /*step_size=*/1, /*gamma=*/0.5);
  load(eager, batches[0]);
  for (int i = 0; i < kWarmupSteps; ++i) eager.step();
  load(captured, batches[0]);
  cuda::CapturedStep step([&] { captured.step(); }, {.warmup_steps = kWarmupSteps});
  for (int i = 1; i <= kReplays; ++i) {
    load(eager, batches[i]);
    eager.step();
    eager_schedule.step();
    load(captured, batches[i]);
    step.replay();
    captured_schedule.step();  // between replays: the rate on the device follows
  }
  CHECK(captured.optimizer->lr() == eager.optimizer->lr());
  check_same_parameters_and_buffers(captured, eager, "replays under StepLR against eager steps");
}

TEST_CASE("CapturedStep: every replay draws new random numbers, those of the eager step, and follows manual_seed",
          "[cuda][graph]") {
  Generator own(99);  // a generator of the caller's, next to the default one
  const Tensor input = ones({4096}, {.device = kCuda});
  using Draws = std::pair<std::vector<double>, std::vector<double>>;  // a dropout mask, normal noise
  Tensor masked, noise;  // what the captured step writes, at every replay
  manual_seed(5);
  cuda::CapturedStep step(
      [&] {
        masked = dropout(input, 0.5);
        noise = randn({256}, {.device = kCuda}, &own);
      },
      {.warmup_steps = 1});
  auto replayed = [&] {
    step.replay();
    return Draws{host_values(masked), host_values(noise)};
  };
  auto eager = [&] { return Draws{host_values(dropout(input, 0.5)), host_values(randn({256}, {.device = kCuda}, &own))}; };

  // Eager reference: the warm-up's draw, then three steps' draws.
  manual_seed(5);
  own.manual_seed(99);
  (void)eager();
  std::vector<Draws> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(eager());
  CHECK(expected[0] != expected[1]);
  // Replays from the states the warm-up left behind.
  manual_seed(5);
  own.manual_seed(99);
  (void)eager();
  for (int i = 0; i < 3; ++i) CHECK(replayed() == expected[static_cast<size_t>(i)]);
  // A new seed between replays reaches the next one.
  manual_seed(5);
  own.manual_seed(99);
  const Draws reseeded = replayed();
  manual_seed(5);
  own.manual_seed(99);
  CHECK(eager() == reseeded);
}

TEST_CASE("CapturedStep: memory allocated between replays never lands on the graph's", "[cuda][graph]") {
  const auto batches = host_batches({64, 784}, 4);
  Trainer eager = mlp_with_adam(), captured = mlp_with_adam();
  load(eager, batches[0]);
  load(captured, batches[0]);
  for (int i = 0; i < kWarmupSteps; ++i) eager.step();
  cuda::CapturedStep step([&] { captured.step(); }, {.warmup_steps = kWarmupSteps});
  std::vector<Tensor> clutter;
  for (int i = 1; i < 4; ++i) {
    load(eager, batches[i]);
    eager.step();
    load(captured, batches[i]);
    step.replay();
    // Between replays, tensors of the sizes the step's temporaries have, filled with NaN:
    // if any took a block of the graph's pool, the next replay would read NaN.
    for (int64_t numel : {64 * 256, 64 * 10, 256 * 784, 1, 4096}) {
      clutter.push_back(full({numel}, std::numeric_limits<double>::quiet_NaN(), {.device = kCuda}));
    }
    clutter.erase(clutter.begin(), clutter.begin() + 2);  // and frees some, to churn the cache
  }
  check_same_parameters_and_buffers(captured, eager, "replays amid clutter against eager steps");
}

TEST_CASE("CapturedStep: what a capture cannot hold is an mg::Error naming it, and eager work goes on",
          "[cuda][graph]") {
  Trainer trainer = mlp_with_adam();
  load(trainer, host_batches({64, 784}, 1)[0]);  // with zero inputs the first layer's gradient is 0
  auto capture = [](const std::function<void()>& step) { cuda::CapturedStep captured(step, {.warmup_steps = 1}); };
  bool warm = false;  // the refusals come during capture, after an eager warm-up that may do anything
  CHECK_THROWS_WITH(capture([&] {
                      trainer.step();
                      if (warm) (void)trainer.loss.item<float>();
                      warm = true;
                    }),
                    Catch::Contains("item()") && Catch::Contains("during CUDA graph capture") &&
                        Catch::Contains("after it"));
  warm = false;
  CHECK_THROWS_WITH(capture([&] {
                      if (warm) cuda::synchronize();
                      warm = true;
                    }),
                    Catch::Contains("cuda::synchronize during CUDA graph capture"));
  warm = false;
  CHECK_THROWS_WITH(capture([&] {
                      (void)randn({4});
                      warm = true;
                    }),
                    Catch::Contains("a random draw for cpu during CUDA graph capture"));
  CHECK_THROWS_WITH(cuda::CapturedStep([] {}, {.device = Device::cpu()}), Catch::Contains("CUDA devices"));
  CHECK_THROWS_WITH(cuda::CapturedStep([] {}, {.warmup_steps = 0}), Catch::Contains("warm-up"));

  // The failed captures were abandoned cleanly: eager steps still train.
  const std::vector<double> before = host_values(trainer.model->parameters()[0]);
  trainer.step();
  CHECK(host_values(trainer.model->parameters()[0]) != before);
}
