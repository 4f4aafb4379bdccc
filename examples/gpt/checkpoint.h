// examples/gpt/checkpoint.h — where a gpt training run stands, and its checkpoint file
// (examples/common/run_checkpoint.h: the model, AdamW's state, the scaler, the schedule,
// the step, the dropout generator (the process-wide one) and the windows' generator, and
// these run.* fields: the run's length, the model's sizes and the estimates so far).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memgrad/core/random.h>
#include "examples/common/distributed_run.h"
#include "examples/common/mixed_precision.h"
#include <memgrad/nn/gpt.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/scheduler.h>
#include <memgrad/optim/state_dict.h>

namespace gpt {

struct RunState {
  int64_t step = 0;         // optimizer steps done
  int64_t total_steps = 0;  // the schedule's length: a resumed run must have the same
  double best_val_loss = 0;  // meaningful once eval_steps is not empty
  int64_t best_step = 0;
  double seconds = 0;          // training and evaluation so far, over every session
  double seconds_to_best = 0;  // `seconds` when best_val_loss was reached
  // One entry per estimate: the step after which it ran, and both splits' losses.
  std::vector<int64_t> eval_steps{};
  std::vector<double> val_losses{};
  std::vector<double> train_losses{};
};

// The model's name in the file's metadata: a checkpoint of another program is refused.
inline const std::string kModelName = "gpt";

// The run's parts that a checkpoint holds beside the model and the optimizer.
struct RunParts {
  examples::MixedPrecision& precision;  // its scaler
  mg::optim::LRScheduler& scheduler;
  mg::Generator& windows;  // the training windows' generator (dropout's is the default one)
};

// `optimizer_state`: examples::checkpoint_state's (ZeRO-1's consolidated state included).
void save_checkpoint(const std::string& path, const mg::nn::GPT& model,
                     const mg::optim::OptimizerStateDict& optimizer_state, const RunParts& parts, const RunState& state);
// The same for a plain optimizer (one process): its optim::state_dict.
void save_checkpoint(const std::string& path, const mg::nn::GPT& model, const mg::optim::Optimizer& optimizer,
                     const RunParts& parts, const RunState& state);

// Loads `path` into `model`, `optimizer` and `parts` (built as when the file was saved)
// and the default generator, and returns the run's state. Throws mg::Error naming the file
// when it does not fit, or was saved by a run of another length than `total_steps`.
RunState load_checkpoint(const std::string& path, mg::nn::GPT& model, mg::optim::Optimizer& optimizer,
                         const RunParts& parts, int64_t total_steps,
                         const examples::DistributedRun& distributed = examples::DistributedRun(mg::Device::cpu()));

}  // namespace gpt
