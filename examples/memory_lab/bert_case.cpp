// examples/memory_lab/bert_case.cpp — experiment "bert_case": a tutorial's story of a
// BERT-base fine-tune ("batch 8 runs out of memory; gradient checkpointing took it from
// 24 GB to 14 GB, mixed precision then to 9 GB") retold with GPT-2 124M's trunk, which
// stands in for a BERT-base-sized encoder: the same 12 layers of 768 wide with 12 heads,
// fine-tuned as BERT is for classification, with a linear classifier on the mean of the
// hidden states. (GPT-2's 50257-token table, against BERT's 30522, and its causal mask
// are the differences; neither changes what a layer saves.)
//
// Three AdamW training steps at a batch and length whose float32 step peaks at about 24 GB
// are predicted on the simulated device standing in for a CUDA GPU (nothing computed, so
// this runs anywhere), and measured too when the lab runs on CUDA: float32, then every
// block checkpointed, then checkpointed under bfloat16 autocast (float32 master weights).
//
// What decides the ratios: checkpointing and autocast shrink the activations only.
// Parameters, gradients and AdamW's two moments (4 + 4 + 8 bytes a parameter, 2 GB for
// 124M) stay. (With GPT-2's language-model head instead, the (B, T, 50257) logits and
// their float32 copy for the loss would be most of what checkpointing leaves.)
#include <cmath>
#include <optional>
#include <string>

#include <memgrad/autograd/reduce.h>
#include <memgrad/core/allocator/registry.h>
#include <memgrad/memory/snapshot.h>
#include "examples/common/memory_prediction.h"
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"
#include <memgrad/nn/linear.h>

namespace memory_lab {
namespace {

// 512 tokens is BERT's longest input; 96 such sequences make the float32 step ~24 GB (with
// fused attention, float32 included: the (T, T) scores are never kept; and, since
// 2026-12-07, the MLP as one op that does not keep GELU's output: 72 made 18.6 GB then).
constexpr int64_t kBatch = 96;
constexpr int64_t kSequence = 512;
constexpr int64_t kClasses = 2;
// The tutorial's figures, in GB.
constexpr double kTutorialFp32 = 24, kTutorialCheckpointed = 14, kTutorialMixed = 9;

struct Setting {
  const char* key;    // in the measurement names
  const char* label;
  bool checkpoint;
  std::optional<mg::DType> autocast;
};
const Setting kSettings[] = {
    {"fp32", "float32", false, std::nullopt},
    {"checkpointed", "checkpointed", true, std::nullopt},
    {"checkpointed_bf16", "checkpointed + bf16 autocast", true, mg::DType::BFloat16},
};

// GPT-2's trunk and a classifier on the mean of its hidden states: (B, T) tokens ->
// (B, classes) logits.
class SequenceClassifier : public mg::nn::Module {
 public:
  explicit SequenceClassifier(const mg::nn::GPTOptions& options) : Module("SequenceClassifier") {
    mg::Generator generator(0);
    transformer = register_module("transformer", std::make_shared<mg::nn::GPTTransformer>(options, &generator));
    classifier =
        register_module("classifier", std::make_shared<mg::nn::Linear>(options.n_embd, kClasses, true, &generator));
  }
  mg::Tensor forward(const mg::Tensor& tokens) override {
    return (*classifier)(mg::mean((*transformer)(tokens), {1}));  // (B, T, C) -> (B, C) -> (B, classes)
  }

  std::shared_ptr<mg::nn::GPTTransformer> transformer;
  std::shared_ptr<mg::nn::Linear> classifier;
};

struct StepPeaks {
  int64_t allocated;
  int64_t reserved;
  int64_t activation;
  int64_t fixed;  // PARAMETER + GRADIENT + OPTIMIZER_STATE peaks: what neither remedy touches
  int64_t parameters;  // bytes
  int64_t tensors;     // parameter tensors: an AdamW step counter each
  int64_t state;       // OPTIMIZER_STATE after the steps
};

// The model built, then examples::kPredictedSteps AdamW steps (the first creates the
// state, the next are the steady state), peaks from before the model.
StepPeaks training_peaks(const Setting& setting, mg::Device device) {
  // Each setting's reserved bytes from an empty cache: otherwise a later, smaller step fits
  // in the segments the float32 step left cached and reserves nothing new.
  mg::allocator_for(device).empty_cache();
  MemoryProbe probe(device);
  mg::nn::GPTOptions options = mg::nn::GPTOptions::gpt2();
  options.checkpoint = setting.checkpoint ? mg::nn::BlockCheckpoint::Whole : mg::nn::BlockCheckpoint::None;
  SequenceClassifier model(options);
  model.to(device);
  const mg::Tensor tokens = make_tokens(kBatch, kSequence, options.vocab_size, device, 0);
  const mg::Tensor labels = make_tokens(kBatch, 1, kClasses, device, 1).view({kBatch});
  mg::optim::AdamW optimizer = make_adamw(model);
  for (int64_t step = 0; step < examples::kPredictedSteps; ++step) {
    autocast_train_step(model, optimizer, tokens, labels, setting.autocast);
  }
  using mg::MemoryCategory;
  return {probe.peak_allocated(),
          probe.peak_reserved(),
          probe.peak(MemoryCategory::Activation),
          probe.peak(MemoryCategory::Parameter) + probe.peak(MemoryCategory::Gradient) +
              probe.peak(MemoryCategory::OptimizerState),
          parameter_bytes(model),
          static_cast<int64_t>(model.parameters().size()),
          probe.current(MemoryCategory::OptimizerState)};
}

StepPeaks predicted_peaks(const Setting& setting) {
  StepPeaks peaks{};
  examples::predict_memory(mg::Device::cuda(), kBatch, [&](mg::Device simulated, int64_t) {
    peaks = training_peaks(setting, simulated);
    return mg::memory::snapshot(simulated);
  });
  return peaks;
}

std::string gigabytes(int64_t bytes) { return format_ratio(static_cast<double>(bytes) / 1e9) + " GB"; }

}  // namespace

Result run_bert_case(mg::Device device) {
  Result result;
  StepPeaks predicted[3], measured[3];
  for (int i = 0; i < 3; ++i) {
    const Setting& setting = kSettings[i];
    const std::string key = setting.key, label = setting.label;
    predicted[i] = predicted_peaks(setting);
    result.measurements.push_back(bytes("predicted_" + key + "_allocated_bytes",
                                        "allocated peak, " + label + " (predicted, cuda)", predicted[i].allocated));
    // Checkpointed, the blocks' inputs stay saved (B x T x C floats each) while one block
    // at a time is recomputed.
    constexpr int64_t kBlockInputs = 12 * kBatch * kSequence * 768 * 4;
    result.measurements.push_back(bytes("predicted_" + key + "_activation_bytes", "  of which ACTIVATION peak",
                                        predicted[i].activation,
                                        setting.checkpoint ? "12 block inputs, " + with_commas(kBlockInputs) +
                                                                 " + one block's activations, recomputed"
                                                           : ""));
    result.measurements.push_back(bytes("predicted_" + key + "_fixed_bytes",
                                        "  PARAMETER + GRADIENT + OPTIMIZER_STATE", predicted[i].fixed,
                                        with_commas(predicted[i].parameters / 4) + " x (4 + 4 + 8) B + " +
                                            std::to_string(predicted[i].tensors) + " x 4 B = " +
                                            with_commas(4 * predicted[i].parameters + 4 * predicted[i].tensors)));
    if (device.is_cuda()) {
      measured[i] = training_peaks(setting, device);
      result.measurements.push_back(bytes("measured_" + key + "_allocated_bytes", "allocated peak, " + label +
                                          " (measured)", measured[i].allocated));
      result.measurements.push_back(bytes("measured_" + key + "_reserved_bytes", "reserved peak, " + label +
                                          " (measured)", measured[i].reserved));
    }
  }
  result.measurements.push_back(bytes("predicted_state_bytes", "OPTIMIZER_STATE (AdamW), predicted",
                                      predicted[0].state,
                                      "2 x " + with_commas(predicted[0].parameters) + " + " +
                                          std::to_string(predicted[0].tensors) + " x 4 = " +
                                          with_commas(2 * predicted[0].parameters + 4 * predicted[0].tensors)));
  // The ratios of the figures this run has: measured on CUDA, predicted elsewhere.
  const StepPeaks* figures = device.is_cuda() ? measured : predicted;
  const double checkpointed = static_cast<double>(figures[1].allocated) / figures[0].allocated;
  const double mixed = static_cast<double>(figures[2].allocated) / figures[0].allocated;
  const double activation_share = static_cast<double>(figures[0].activation) / figures[0].allocated;
  result.measurements.push_back(ratio("checkpointed_ratio", "checkpointed / float32", checkpointed,
                                      "tutorial 14/24 = " + format_ratio(kTutorialCheckpointed / kTutorialFp32)));
  result.measurements.push_back(ratio("checkpointed_bf16_ratio", "checkpointed + bf16 / float32", mixed,
                                      "tutorial 9/24 = " + format_ratio(kTutorialMixed / kTutorialFp32)));
  result.measurements.push_back(ratio("activation_share_fp32", "ACTIVATION share of the float32 peak",
                                      activation_share));
  if (device.is_cuda()) {
    result.measurements.push_back(ratio("measured_over_predicted_fp32", "measured / predicted, float32",
                                        static_cast<double>(measured[0].allocated) / predicted[0].allocated));
  }

  // The tutorial's direction holds when each remedy lowers the peak; its sizes when the
  // ratios are within 0.1 of 14/24 and 9/24.
  const bool direction = figures[1].allocated < figures[0].allocated && figures[2].allocated < figures[1].allocated;
  const bool sizes = std::abs(checkpointed - kTutorialCheckpointed / kTutorialFp32) < 0.1 &&
                     std::abs(mixed - kTutorialMixed / kTutorialFp32) < 0.1;
  result.verdict = !direction ? Verdict::False : sizes ? Verdict::True : Verdict::Partly;
  result.why = std::string(device.is_cuda() ? "measured" : "predicted for cuda") + ", batch " +
               std::to_string(kBatch) + " x " + std::to_string(kSequence) + ": " + gigabytes(figures[0].allocated) +
               " -> " + gigabytes(figures[1].allocated) + " checkpointed (" + format_ratio(checkpointed) +
               "; tutorial 0.583) -> " + gigabytes(figures[2].allocated) + " with bf16 (" + format_ratio(mixed) +
               "; tutorial 0.375): activations were " + format_ratio(activation_share) +
               " of the float32 peak, and only they shrink; the " + gigabytes(figures[0].fixed) +
               " of weights, gradients and AdamW state stay.";
  return result;
}

}  // namespace memory_lab
