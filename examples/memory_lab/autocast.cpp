// examples/memory_lab/autocast.cpp — experiment "autocast": the memory of a training
// forward and backward in float32 and under 16-bit autocast (bfloat16 on the CPU, float16
// on CUDA, each device's default).
//
// Under autocast the linear layers compute in 16 bits, so what they and the ReLUs save is
// 16-bit; the loss stays float32. The master weights stay float32 (and so do their
// gradients), and autocast keeps a 16-bit copy of each weight for its region
// (AUTOCAST_CACHE), which the graph keeps until backward has used it.
#include <optional>
#include <string>

#include <memgrad/autocast/autocast.h>
#include <memgrad/autograd/loss.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"

namespace memory_lab {
namespace {

// 128 samples of 128 features through four 1024-wide hidden layers: the ReLU outputs
// (4 x 128x1024) dominate what is saved; the input's 16-bit copy (128x128) and what the
// float32 cross-entropy saves (128x10 logits, 128 log-sum-exps, a count) are small beside
// them, so the ratio shows the 16-bit saving.
constexpr int64_t kBatch = 128;
const MlpShape kShape{.inputs = 128, .hidden = {1024, 1024, 1024, 1024}, .classes = 10};

struct StepPeaks {
  int64_t activation;
  int64_t autocast_cache;
  int64_t parameter;  // PARAMETER bytes during the step, above the start: the weights stay float32
  int64_t allocated;
};

// Forward (under autocast when `dtype` is set) and backward outside it, as PyTorch advises.
StepPeaks step_peaks(std::optional<mg::DType> dtype, mg::Device device) {
  auto model = make_mlp(kShape, device);
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);
  const mg::Tensor targets = make_targets(kBatch, kShape.classes, device);
  MemoryProbe probe(device);
  mg::Tensor loss;
  {
    std::optional<mg::amp::AutocastGuard> autocast;
    if (dtype) autocast.emplace(*dtype, device.type);
    loss = mg::cross_entropy((*model)(inputs), targets);
  }
  loss.backward();
  return {probe.peak(mg::MemoryCategory::Activation), probe.peak(mg::MemoryCategory::AutocastCache),
          probe.peak(mg::MemoryCategory::Parameter), probe.peak_allocated()};
}

}  // namespace

Result run_autocast(mg::Device device) {
  const mg::DType half = mg::amp::autocast_dtype(device.type);
  const std::string half_name = half == mg::DType::BFloat16 ? "bfloat16" : "float16";
  const StepPeaks fp32 = step_peaks(std::nullopt, device);
  const StepPeaks reduced = step_peaks(half, device);
  const int64_t parameters = parameter_bytes(*make_mlp(kShape, device));
  const double activation_ratio = static_cast<double>(reduced.activation) / fp32.activation;
  const double allocated_ratio = static_cast<double>(reduced.allocated) / fp32.allocated;
  const int64_t loss_saves = kBatch * 10 * 4 + kBatch * 4 + 4;
  const int64_t saved_fp32 = 4 * kBatch * 1024 * 4 + loss_saves;
  const int64_t saved_half = 4 * kBatch * 1024 * 2 + kBatch * kShape.inputs * 2 + loss_saves;

  Result result;
  result.measurements = {
      bytes("activation_peak_fp32_bytes", "ACTIVATION peak, float32", fp32.activation,
            "4x128x1024x4 + 128x10x4 + 128x4 + 4 = " + with_commas(saved_fp32)),
      bytes("activation_peak_autocast_bytes", "ACTIVATION peak, autocast " + half_name, reduced.activation,
            "4x128x1024x2 + 128x128x2 + 128x10x4 + 128x4 + 4 = " + with_commas(saved_half)),
      ratio("activation_ratio", "ACTIVATION peak ratio, autocast / float32", activation_ratio,
            format_ratio(static_cast<double>(saved_half) / saved_fp32)),
      bytes("parameter_bytes", "PARAMETER (float32 weights, both runs)", parameters),
      bytes("parameter_growth_autocast_bytes", "PARAMETER growth under autocast", reduced.parameter, "0"),
      bytes("autocast_cache_peak_bytes", "AUTOCAST_CACHE peak (16-bit weight copies)", reduced.autocast_cache,
            "half the parameters, " + with_commas(parameters / 2)),
      bytes("allocated_peak_fp32_bytes", "allocated peak of forward + backward above the model, float32",
            fp32.allocated),
      bytes("allocated_peak_autocast_bytes", "allocated peak of forward + backward above the model, autocast",
            reduced.allocated),
      ratio("allocated_ratio", "allocated peak ratio, autocast / float32", allocated_ratio),
  };
  // "Halves the memory" holds for what the ops save; the step's total also holds float32
  // weights and gradients, and a 16-bit copy of the weights on top.
  const bool activations_halve = activation_ratio < 0.6;
  const bool total_halves = allocated_ratio < 0.6;
  result.verdict = !activations_halve ? Verdict::False : total_halves ? Verdict::True : Verdict::Partly;
  result.why = "the activations fell to " + format_ratio(activation_ratio) + " of float32's, but the step's "
               "allocated peak went to " + format_ratio(allocated_ratio) + "x: weights and gradients stay float32 "
               "and autocast adds a 16-bit copy of the weights (" + with_commas(reduced.autocast_cache) + " B).";
  return result;
}

}  // namespace memory_lab
