// tests/nn/test_accumulation.cpp — gradient accumulation (the pattern of
// examples/common/accumulation.h): backward of each micro-batch's mean loss scaled by 1/N
// leaves in .grad the gradient of one batch N times as large, and, since every backward
// frees its own graph, the activation peak is one micro-batch's whatever N is.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using mg_test::max_abs_difference;

constexpr int64_t kClasses = 5;

// Convolution, ReLU, max-pool and a linear head in float64: no batch norm (which would
// normalise each micro-batch with its own statistics) and no dropout (random masks).
std::shared_ptr<nn::Sequential> small_cnn(uint64_t seed) {
  Generator generator(seed);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 4, 3, Conv2dOptions{}, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 3 * 3, kClasses, true, &generator));
  model->to(DType::Float64);
  return model;
}

struct Batch {
  Tensor inputs;   // (B, 1, 8, 8)
  Tensor targets;  // (B)
};

Batch random_batch(int64_t size, Generator& generator) {
  return {randn({size, 1, 8, 8}, {.dtype = DType::Float64, .category = MemoryCategory::Input}, &generator),
          randint(0, kClasses, {size}, {.dtype = DType::Int64, .category = MemoryCategory::Input}, &generator)};
}

// One micro-batch's share of an accumulated step.
void backward_micro_batch(nn::Module& model, const Batch& batch, int64_t micro_batches) {
  Tensor loss = cross_entropy(model(batch.inputs), batch.targets);
  (loss * (1.0 / static_cast<double>(micro_batches))).backward();
}

}  // namespace

TEST_CASE("four accumulated micro-batches give the gradients of one four-times larger batch", "[accumulation]") {
  constexpr int64_t kMicroBatch = 8, kMicroBatches = 4;
  Generator data(1);
  const Batch large = random_batch(kMicroBatch * kMicroBatches, data);

  auto whole = small_cnn(2);
  cross_entropy((*whole)(large.inputs), large.targets).backward();

  auto accumulated = small_cnn(2);
  for (int64_t i = 0; i < kMicroBatches; ++i) {
    const Batch micro{large.inputs.narrow(0, i * kMicroBatch, kMicroBatch),
                      large.targets.narrow(0, i * kMicroBatch, kMicroBatch)};
    backward_micro_batch(*accumulated, micro, kMicroBatches);
  }

  nn::NamedTensors expected = whole->named_parameters(), actual = accumulated->named_parameters();
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("gradient of " << expected[i].first);
    CHECK(max_abs_difference(expected[i].second.grad(), zeros_like(expected[i].second)) > 1e-3);
    // Float64: the sums differ only in the order of their terms.
    CHECK(max_abs_difference(expected[i].second.grad(), actual[i].second.grad()) <= 1e-12);
  }
}

TEST_CASE("the activation peak of an accumulated step does not grow with the number of micro-batches",
          "[accumulation]") {
  constexpr int64_t kMicroBatch = 16;
  auto model = small_cnn(3);
  Generator data(4);
  std::vector<int64_t> peaks;
  for (int64_t micro_batches : {1, 4, 16}) {
    model->zero_grad();
    memory::reset_peak_stats();
    for (int64_t i = 0; i < micro_batches; ++i) backward_micro_batch(*model, random_batch(kMicroBatch, data), micro_batches);
    const memory::Snapshot snapshot = memory::snapshot();
    CHECK(snapshot.category(MemoryCategory::Activation).current == 0);  // every graph freed
    peaks.push_back(snapshot.category(MemoryCategory::Activation).peak);
  }
  // Measured on the CPU: 24,392 bytes for each N, one micro-batch's ReLU output (18,432),
  // pool output (4,608, the Linear's input), pool indices (576, one byte each),
  // log-softmax output (640) and the loss's small tensors.
  INFO("ACTIVATION peaks for N = 1, 4, 16: " << peaks[0] << ", " << peaks[1] << ", " << peaks[2]);
  CHECK(peaks[0] > 0);
  CHECK(peaks[1] == peaks[0]);
  CHECK(peaks[2] == peaks[0]);
}
