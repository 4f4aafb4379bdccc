// examples/memory_lab/checkpointing.cpp — experiment "checkpointing": the activation peak
// and the time of a training step of a 16-layer MLP, plain and with each quarter of it
// under mg::checkpoint.
//
// A checkpointed segment saves only its input during the forward; backward runs the
// segment again with grad mode on and backpropagates through that copy. So the activations
// are those of the segment inputs plus one segment's, and the step does one more forward
// of every checkpointed segment.
#include <algorithm>
#include <chrono>
#include <vector>

#include <memgrad/autograd/checkpoint.h>
#include <memgrad/autograd/loss.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"

namespace memory_lab {
namespace {

// 16 Linear + ReLU layers 256 wide on 512 samples, in 4 segments of 4 layers (the square
// root of the depth, which balances saved segment inputs against one segment's
// activations); each ReLU output is 512x256 floats, 512 KiB, so the activations (8 MiB)
// outweigh the weights (4 MiB), as in the networks checkpointing is for.
constexpr int64_t kBatch = 512;
constexpr int64_t kWidth = 256;
constexpr int64_t kLayers = 16;
constexpr int64_t kSegments = 4;
const MlpShape kShape{.inputs = kWidth, .hidden = std::vector<int64_t>(kLayers, kWidth), .classes = 10};
// Steps timed per setting (the median is reported), after one untimed warm-up step.
constexpr int kTimedSteps = 5;

// Modules [begin, end) of the Sequential, applied in order.
mg::Tensor run_modules(const mg::nn::Sequential& model, size_t begin, size_t end, mg::Tensor x) {
  for (size_t i = begin; i < end; ++i) x = model[i]->forward(x);
  return x;
}

// The logits, each of the kSegments segments checkpointed when `checkpointed`.
mg::Tensor forward(const mg::nn::Sequential& model, const mg::Tensor& inputs, bool checkpointed) {
  constexpr size_t kModulesPerSegment = 2 * kLayers / kSegments;  // Linear and ReLU per layer
  mg::Tensor x = inputs;
  for (size_t segment = 0; segment < kSegments; ++segment) {
    const size_t begin = segment * kModulesPerSegment, end = begin + kModulesPerSegment;
    const auto run_segment = [&, begin, end](const mg::Tensor& input) {
      return run_modules(model, begin, end, input);
    };
    x = checkpointed ? mg::checkpoint(run_segment, x) : run_segment(x);
  }
  return run_modules(model, 2 * kLayers, model.size(), x);  // the classifier
}

struct StepFigures {
  int64_t activation_peak;
  int64_t allocated_peak;
  double median_ms;
};

StepFigures measure(bool checkpointed, mg::Device device) {
  auto model = make_mlp(kShape, device);
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);
  const mg::Tensor targets = make_targets(kBatch, kShape.classes, device);
  const auto step = [&] {
    model->zero_grad();
    mg::Tensor loss = mg::cross_entropy(forward(*model, inputs, checkpointed), targets);
    loss.backward();
    return loss.item();  // waits for the device, so a timed step includes all its work
  };
  step();  // warm-up: gradients allocated once, kernels and caches ready
  model->zero_grad();
  MemoryProbe probe(device);
  step();
  const int64_t activation_peak = probe.peak(mg::MemoryCategory::Activation);
  const int64_t allocated_peak = probe.peak_allocated();
  std::vector<double> times;
  for (int i = 0; i < kTimedSteps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + kTimedSteps / 2, times.end());
  return {activation_peak, allocated_peak, times[kTimedSteps / 2]};
}

}  // namespace

Result run_checkpointing(mg::Device device) {
  const StepFigures plain = measure(false, device);
  const StepFigures checkpointed = measure(true, device);
  const double activation_ratio = static_cast<double>(checkpointed.activation_peak) / plain.activation_peak;
  const double time_ratio = checkpointed.median_ms / plain.median_ms;
  constexpr int64_t kReluOutput = kBatch * kWidth * 4;
  constexpr int64_t kLossSaves = kBatch * 10 * 4 + kBatch * 4 + 4;  // logits, log-sum-exps, count
  Result result;
  result.measurements = {
      bytes("activation_peak_plain_bytes", "ACTIVATION peak of a step, plain", plain.activation_peak,
            "16 ReLU outputs x " + with_commas(kReluOutput) + " + the loss's " + with_commas(kLossSaves) + " = " +
                with_commas(kLayers * kReluOutput + kLossSaves)),
      bytes("activation_peak_checkpointed_bytes", "ACTIVATION peak of a step, 4 segments checkpointed",
            checkpointed.activation_peak,
            "(3 segment inputs + 4 recomputed ReLU outputs) x " + with_commas(kReluOutput) + " = " +
                with_commas(7 * kReluOutput)),
      ratio("activation_ratio", "ACTIVATION peak ratio, checkpointed / plain", activation_ratio),
      bytes("allocated_peak_plain_bytes", "allocated peak of a step, plain", plain.allocated_peak),
      bytes("allocated_peak_checkpointed_bytes", "allocated peak of a step, checkpointed",
            checkpointed.allocated_peak),
      milliseconds("step_plain_ms", "step time, plain (median of 5)", plain.median_ms),
      milliseconds("step_checkpointed_ms", "step time, checkpointed (median of 5)", checkpointed.median_ms),
      ratio("time_ratio", "step time ratio, checkpointed / plain", time_ratio,
            "about 4/3: one more forward per step"),
  };
  result.verdict = activation_ratio <= 0.6 ? Verdict::True : Verdict::Partly;
  result.why = "the activation peak fell to " + format_ratio(activation_ratio) + " of the plain step's for " +
               format_ratio(time_ratio) + "x its time: the segments' forwards ran twice.";
  return result;
}

}  // namespace memory_lab
