// examples/memory_lab/adamw_state.cpp — experiment "adamw_state": the memory of a GPT's
// training step with AdamW (weight-decay groups, as nanoGPT), by category, in float32 and
// under bfloat16 autocast with float32 master weights. (GPT-2 124M's state, predicted, is
// in experiment "bert_case": the same arithmetic.)
//
// AdamW keeps two moments per parameter, each the parameter's size and dtype, and a 4-byte
// step counter per parameter tensor. Autocast changes what the forward computes in, not the
// parameters: they stay float32, so the moments do too; what autocast adds is a 16-bit copy
// of each weight a matmul casts (AUTOCAST_CACHE), held while the autocast region lives.
#include <optional>
#include <string>

#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"

namespace memory_lab {
namespace {

// nanoGPT-style small GPT over bytes: 2 blocks, 2 heads, 64 wide, 64 positions; a step of 4
// windows of 64 tokens takes milliseconds on a CPU.
mg::nn::GPTOptions small_gpt() {
  return {.n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = 64, .vocab_size = 256};
}
constexpr int64_t kBatch = 4;
constexpr int64_t kSequence = 64;

struct StepMemory {
  int64_t parameters;        // bytes of the model's parameters (the tied table once)
  int64_t tensors;           // parameter tensors: one step counter each
  int64_t cast_parameters;   // bytes of those autocast copies (cast_parameter_bytes)
  int64_t parameter_growth;  // PARAMETER bytes above the built model's: 0 while the weights stay float32
  int64_t gradient_peak;
  int64_t state;             // OPTIMIZER_STATE after the steps
  int64_t autocast_cache_peak;
};

// Bytes of the parameters a matmul casts under autocast: all but the LayerNorms' and the
// position table (an embedding lookup and layer norm run in float32); the token table is
// cast once, by the tied lm_head's product.
int64_t cast_parameter_bytes(const mg::nn::GPT& model) {
  int64_t total = 0;
  for (const auto& [name, parameter] : model.named_parameters()) {
    const bool float32_op = name.find(".ln_") != std::string::npos || name.find("wpe") != std::string::npos;
    if (!float32_op) total += static_cast<int64_t>(parameter.nbytes());
  }
  return total;
}

// Two AdamW steps of a freshly built model (the first creates the state), measured from
// just after the model was built.
StepMemory adamw_steps(const mg::nn::GPTOptions& options, std::optional<mg::DType> autocast, mg::Device device) {
  auto model = make_gpt(options, device);
  const mg::Tensor tokens = make_tokens(kBatch, kSequence, options.vocab_size, device, 0);
  const mg::Tensor targets = make_tokens(kBatch, kSequence, options.vocab_size, device, 1);
  MemoryProbe probe(device);
  mg::optim::AdamW optimizer = make_adamw(*model);
  for (int step = 0; step < 2; ++step) autocast_train_step(*model, optimizer, tokens, targets, autocast);
  return {parameter_bytes(*model), static_cast<int64_t>(model->parameters().size()), cast_parameter_bytes(*model),
          probe.peak(mg::MemoryCategory::Parameter), probe.peak(mg::MemoryCategory::Gradient),
          probe.current(mg::MemoryCategory::OptimizerState), probe.peak(mg::MemoryCategory::AutocastCache)};
}

}  // namespace

Result run_adamw_state(mg::Device device) {
  const StepMemory fp32 = adamw_steps(small_gpt(), std::nullopt, device);
  const StepMemory bf16 = adamw_steps(small_gpt(), mg::DType::BFloat16, device);
  const int64_t parameters = fp32.parameters, tensors = fp32.tensors;
  const int64_t expected_state = 2 * parameters + 4 * tensors;
  const int64_t expected_cache = fp32.cast_parameters / 2;

  const auto times_parameters = [&](int64_t state) { return static_cast<double>(state) / parameters; };
  const std::string counters = std::to_string(tensors) + " counters x 4 B";
  Result result;
  result.measurements = {
      bytes("parameter_bytes", "PARAMETER, small GPT (float32)", parameters,
            with_commas(parameters / 4) + " x 4 B in " + std::to_string(tensors) + " tensors"),
      bytes("gradient_peak_fp32_bytes", "GRADIENT peak, float32", fp32.gradient_peak, "1x parameters"),
      bytes("state_fp32_bytes", "OPTIMIZER_STATE, float32", fp32.state,
            "2x parameters + " + counters + " = " + with_commas(expected_state)),
      ratio("state_ratio_fp32", "OPTIMIZER_STATE / parameters, float32", times_parameters(fp32.state)),
      bytes("parameter_growth_bf16_bytes", "PARAMETER growth, bf16 autocast", bf16.parameter_growth, "0"),
      bytes("gradient_peak_bf16_bytes", "GRADIENT peak, bf16 autocast", bf16.gradient_peak,
            "1x parameters: float32, as the master weights"),
      bytes("state_bf16_bytes", "OPTIMIZER_STATE, bf16 autocast", bf16.state,
            "unchanged: " + with_commas(expected_state)),
      bytes("autocast_cache_peak_bf16_bytes", "AUTOCAST_CACHE peak, bf16 autocast", bf16.autocast_cache_peak,
            "half the matmuls' weights (all but LayerNorms and wpe) = " + with_commas(expected_cache)),
  };
  const bool twice = fp32.state == expected_state;
  const bool unchanged_under_autocast = bf16.state == fp32.state && bf16.parameter_growth == 0;
  result.verdict = twice && unchanged_under_autocast ? Verdict::True : Verdict::False;
  result.why = "AdamW kept " + with_commas(fp32.state) + " B for " + with_commas(parameters) +
               " B of parameters (2x + " + std::to_string(tensors) + " step counters), and as much under bf16 autocast, whose master weights stay "
               "float32; autocast added " + with_commas(bf16.autocast_cache_peak) + " B of 16-bit weight copies.";
  return result;
}

}  // namespace memory_lab
