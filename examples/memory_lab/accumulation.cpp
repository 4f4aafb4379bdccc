// examples/memory_lab/accumulation.cpp — experiment "accumulation": the peak memory of an
// optimizer step over 1 micro-batch and over 8 accumulated micro-batches of the same size,
// beside one batch 8 times as large.
//
// Each micro-batch's backward adds its gradient into .grad and releases its own graph
// before the next forward, so only one micro-batch's activations are ever alive; the
// gradients exist once, whatever the number of micro-batches.
#include <vector>

#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/loss.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"
#include <memgrad/optim/sgd.h>

namespace memory_lab {
namespace {

// Micro-batches of 128 samples through two 512-wide hidden layers (1.6 MB of parameters,
// so that a large batch's activations outweigh them): one micro-batch saves 2 x 128x512
// floats of ReLU outputs, and cross-entropy its 128x10 logits, 128 log-sum-exps and the
// 4-byte target count.
constexpr int64_t kMicroBatch = 128;
constexpr int64_t kAccumulationSteps = 8;
const MlpShape kShape{.inputs = 256, .hidden = {512, 512}, .classes = 10};
const int64_t kSavedPerMicroBatch = mlp_saved_bytes(kShape, kMicroBatch);

struct StepPeaks {
  int64_t activation;
  int64_t gradient;
  int64_t allocated;
};

// One optimizer step over `micro_batches` micro-batches of `batch` samples each; peaks
// measured from just after zero_grad() (no gradients) to the end of step().
StepPeaks step_peaks(int64_t batch, int64_t micro_batches, mg::Device device) {
  auto model = make_mlp(kShape, device);
  mg::optim::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  std::vector<mg::Tensor> inputs, targets;
  for (int64_t i = 0; i < micro_batches; ++i) {
    inputs.push_back(make_inputs(batch, kShape.inputs, device));
    targets.push_back(make_targets(batch, kShape.classes, device));
  }
  // A step first: the momentum buffers exist before the measured step, as in training.
  train_step_backward(*model, inputs[0], targets[0]);
  optimizer.step();

  optimizer.zero_grad();
  MemoryProbe probe(device);
  for (int64_t i = 0; i < micro_batches; ++i) {
    const mg::Tensor loss = mg::cross_entropy((*model)(inputs[i]), targets[i]);
    (loss * (1.0 / static_cast<double>(micro_batches))).backward();
  }
  optimizer.step();
  return {probe.peak(mg::MemoryCategory::Activation), probe.peak(mg::MemoryCategory::Gradient),
          probe.peak_allocated()};
}

}  // namespace

Result run_accumulation(mg::Device device) {
  const StepPeaks single = step_peaks(kMicroBatch, 1, device);
  const StepPeaks two = step_peaks(kMicroBatch, 2, device);
  const StepPeaks accumulated = step_peaks(kMicroBatch, kAccumulationSteps, device);
  const StepPeaks large_batch = step_peaks(kMicroBatch * kAccumulationSteps, 1, device);
  Result result;
  result.measurements = {
      bytes("activation_peak_accum1_bytes", "ACTIVATION peak, 1 micro-batch of 128", single.activation,
            "2x128x512x4 + 128x10x4 + 128x4 + 4 = " + with_commas(kSavedPerMicroBatch)),
      bytes("activation_peak_accum8_bytes", "ACTIVATION peak, 8 accumulated micro-batches of 128",
            accumulated.activation, "the same"),
      bytes("activation_peak_batch1024_bytes", "ACTIVATION peak, one batch of 1024", large_batch.activation,
            "8 x 2x128x512x4 + 1024x10x4 + 1024x4 + 4"),
      bytes("gradient_peak_accum1_bytes", "GRADIENT peak, 1 micro-batch", single.gradient,
            "the parameters' bytes, " + with_commas(parameter_bytes(*make_mlp(kShape, device)))),
      bytes("gradient_peak_accum8_bytes", "GRADIENT peak, 8 micro-batches", accumulated.gradient, "the same"),
      bytes("allocated_peak_accum1_bytes", "allocated peak of the step, 1 micro-batch", single.allocated),
      bytes("allocated_peak_accum2_bytes", "allocated peak of the step, 2 micro-batches", two.allocated),
      bytes("allocated_peak_accum8_bytes", "allocated peak of the step, 8 micro-batches", accumulated.allocated,
            "the same as 2"),
      bytes("allocated_peak_batch1024_bytes", "allocated peak of the step, one batch of 1024",
            large_batch.allocated),
  };
  const bool same_activations = accumulated.activation == single.activation;
  result.verdict = same_activations ? Verdict::False
                   : accumulated.activation >= 7 * single.activation ? Verdict::True
                                                                       : Verdict::Partly;
  result.why = "8 accumulated micro-batches peaked at " + with_commas(accumulated.activation) +
               " B of activations, as 1 did (each backward frees its graph; 8x is one batch of 1024: " +
               with_commas(large_batch.activation) + " B), and the step's total rose from " +
               with_commas(single.allocated) + " to " + with_commas(accumulated.allocated) +
               " B, as much for 2 micro-batches as for 8, because .grad already holds the gradients while "
               "backward's buffers peak.";
  return result;
}

}  // namespace memory_lab
