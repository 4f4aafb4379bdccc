// tests/nn/test_selective_checkpoint_models.cpp — selective block checkpointing in the
// models (nn/block_checkpoint.h): a GPT's blocks (matmuls and attention kept) and ResNet's
// BasicBlock and Bottleneck (convolutions kept) give the unchecked logits, gradients and
// running statistics in float64, with dropout too; their kept convolutions run no kernel
// in the recompute; a step's ACTIVATION peak lies between whole-block checkpointing's and
// none's.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/nn/nn.h"
#include "nn/gpt_test_support.h"

using namespace mg;

namespace {

using mg_test::max_abs_difference;

// Every parameter's gradient and every buffer (running statistics, counters) agree exactly.
void check_same_state(const nn::Module& plain, const nn::Module& checked) {
  nn::NamedTensors plain_parameters = plain.named_parameters(), checked_parameters = checked.named_parameters();
  REQUIRE(plain_parameters.size() == checked_parameters.size());
  for (size_t i = 0; i < plain_parameters.size(); ++i) {
    INFO("gradient of " << plain_parameters[i].first);
    REQUIRE(checked_parameters[i].second.grad().defined());
    CHECK(max_abs_difference(plain_parameters[i].second.grad(), checked_parameters[i].second.grad()) == 0.0);
  }
  nn::NamedTensors plain_buffers = plain.named_buffers(), checked_buffers = checked.named_buffers();
  REQUIRE(plain_buffers.size() == checked_buffers.size());
  for (size_t i = 0; i < plain_buffers.size(); ++i) {
    INFO("buffer " << plain_buffers[i].first);
    CHECK(max_abs_difference(plain_buffers[i].second, checked_buffers[i].second) == 0.0);
  }
}

Tensor language_model_loss(const Tensor& logits, const Tensor& targets) {
  const int64_t rows = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {rows, logits.size(2)}), reshape(targets, {rows}));
}

struct GptStep {
  std::shared_ptr<nn::GPT> model;
  Tensor logits;
  int64_t activation_peak = 0;  // above what was held before the step
};

GptStep gpt_step(nn::GPTOptions options, nn::BlockCheckpoint mode, DType dtype) {
  options.checkpoint = mode;
  GptStep step{gpt_test::make_gpt(options, 11), {}, 0};
  step.model->to(dtype);
  const Tensor tokens = gpt_test::random_tokens({4, 16}, 50, 9), targets = gpt_test::random_tokens({4, 16}, 50, 10);
  const int64_t before = memory::snapshot().category(MemoryCategory::Activation).current;
  memory::reset_peak_stats();
  manual_seed(21);
  step.logits = (*step.model)(tokens);
  language_model_loss(step.logits, targets).backward();
  step.activation_peak = memory::snapshot().category(MemoryCategory::Activation).peak - before;
  step.logits = step.logits.detach();
  return step;
}

}  // namespace

TEST_CASE("a GPT's selectively checkpointed blocks give the unchecked logits and gradients in float64, with "
          "dropout, at an ACTIVATION peak between whole-block checkpointing's and none's",
          "[selective_checkpoint_models]") {
  nn::GPTOptions options = gpt_test::tiny_options();
  options.n_layer = 4;
  options.n_embd = 32;
  options.block_size = 16;
  for (AttentionBackend attention : {AttentionBackend::Math, AttentionBackend::Fused}) {
    for (double dropout : {0.0, 0.2}) {
      options.attention = attention;
      options.dropout = dropout;
      INFO(attention_backend_name(attention) << " attention, dropout " << dropout);
      const GptStep none = gpt_step(options, nn::BlockCheckpoint::None, DType::Float64);
      const GptStep selective = gpt_step(options, nn::BlockCheckpoint::Selective, DType::Float64);
      const GptStep whole = gpt_step(options, nn::BlockCheckpoint::Whole, DType::Float64);
      CHECK(max_abs_difference(none.logits, selective.logits) == 0.0);
      check_same_state(*none.model, *selective.model);
      INFO("ACTIVATION peak: " << none.activation_peak << " bytes unchecked, " << selective.activation_peak
           << " selective, " << whole.activation_peak << " whole");
      CHECK(whole.activation_peak < selective.activation_peak);
      CHECK(selective.activation_peak < none.activation_peak);
    }
  }
}

namespace {

// A residual block's step in float64 and training mode: run directly or under a selective
// checkpoint; the Recorder counts the allocations each op made in the backward.
struct BlockStep {
  std::shared_ptr<nn::Module> block;
  Tensor output, input_grad;
  std::map<std::string, int> backward_allocations;  // by op
};

BlockStep block_step(bool bottleneck, nn::BlockCheckpoint mode) {
  Generator generator(31);
  // 16 channels in, stride 2: both blocks need a downsample shortcut.
  const int64_t planes = bottleneck ? 8 : 32, out_channels = 32;
  auto downsample = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(16, out_channels, 1, Conv2dOptions{.stride = {2, 2}}, false, &generator),
      std::make_shared<nn::BatchNorm2d>(out_channels));
  std::shared_ptr<nn::Module> block;
  if (bottleneck) {
    block = std::make_shared<nn::Bottleneck>(16, planes, 2, downsample, &generator);
  } else {
    block = std::make_shared<nn::BasicBlock>(16, planes, 2, downsample, &generator);
  }
  block->to(DType::Float64);
  block->train();
  Generator data(32);
  Tensor input = randn({2, 16, 8, 8}, {.dtype = DType::Float64}, &data).requires_grad_();
  memory::Recorder recorder({.device = Device::cpu()});
  recorder.start();
  Tensor output = nn::run_block(mode, CheckpointPolicy::convolutions(),
                                [block](const Tensor& x) { return (*block)(x); }, input);
  sum(mul(output, output)).backward();
  recorder.stop();
  BlockStep step{block, output.detach(), input.grad(), {}};
  for (const memory::MemoryEvent& event : recorder.timeline().events) {
    if (event.kind == memory::EventKind::Allocate && event.phase == memory::Phase::Backward) {
      ++step.backward_allocations[event.op];
    }
  }
  return step;
}

}  // namespace

TEST_CASE("ResNet's BasicBlock and Bottleneck under a selective checkpoint: the unchecked gradients and running "
          "statistics in float64, no convolution run again",
          "[selective_checkpoint_models]") {
  for (bool bottleneck : {false, true}) {
    INFO((bottleneck ? "Bottleneck" : "BasicBlock"));
    const BlockStep plain = block_step(bottleneck, nn::BlockCheckpoint::None);
    const BlockStep selective = block_step(bottleneck, nn::BlockCheckpoint::Selective);
    const BlockStep whole = block_step(bottleneck, nn::BlockCheckpoint::Whole);
    CHECK(max_abs_difference(plain.output, selective.output) == 0.0);
    CHECK(max_abs_difference(plain.input_grad, selective.input_grad) == 0.0);
    check_same_state(*plain.block, *selective.block);
    CHECK(whole.backward_allocations.at("Conv2d") >= (bottleneck ? 4 : 3));  // every convolution's output again
    CHECK(selective.backward_allocations.count("Conv2d") == 0);
  }
}

TEST_CASE("ResNetOptions' selective checkpointing matches the unchecked ResNet, its ACTIVATION peak between whole "
          "and none",
          "[selective_checkpoint_models]") {
  auto make = [](nn::BlockCheckpoint mode) {
    Generator generator(5);
    return nn::resnet18(
        {.num_classes = 10, .small_image_stem = true, .generator = &generator, .checkpoint_stages = mode});
  };
  Generator data(6);
  Tensor input = randn({2, 3, 16, 16}, {.category = MemoryCategory::Input}, &data);
  Tensor target = randint(0, 10, {2}, {.dtype = DType::Int64, .category = MemoryCategory::Input}, &data);
  std::map<nn::BlockCheckpoint, int64_t> peaks;
  std::map<nn::BlockCheckpoint, std::shared_ptr<nn::ResNet>> models;
  for (nn::BlockCheckpoint mode : {nn::BlockCheckpoint::None, nn::BlockCheckpoint::Selective,
                                   nn::BlockCheckpoint::Whole}) {
    models[mode] = make(mode);
    models[mode]->to(DType::Float64);
    Tensor input64 = input.to(DType::Float64);
    const int64_t before = memory::snapshot().category(MemoryCategory::Activation).current;
    memory::reset_peak_stats();
    cross_entropy((*models[mode])(input64), target).backward();
    peaks[mode] = memory::snapshot().category(MemoryCategory::Activation).peak - before;
  }
  INFO("ACTIVATION peak: " << peaks[nn::BlockCheckpoint::None] << " bytes unchecked, "
       << peaks[nn::BlockCheckpoint::Selective] << " selective, " << peaks[nn::BlockCheckpoint::Whole] << " whole");
  CHECK(peaks[nn::BlockCheckpoint::Whole] < peaks[nn::BlockCheckpoint::Selective]);
  CHECK(peaks[nn::BlockCheckpoint::Selective] < peaks[nn::BlockCheckpoint::None]);
  check_same_state(*models[nn::BlockCheckpoint::None], *models[nn::BlockCheckpoint::Selective]);
}
