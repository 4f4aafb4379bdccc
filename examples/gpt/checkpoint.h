// examples/gpt/checkpoint.h — where a gpt training run stands, and its checkpoint file
// (examples/common/run_checkpoint.h: model.*, optimizer.*, scaler.*, and these run.*
// fields). What an exact resume needs beyond the model and AdamW's state: the step (the
// schedule is a closed form of it), the windows' generator and the dropout generator (the
// process-wide one) as (seed, offset) pairs, and the best validation loss so far.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memgrad/core/kernels.h>
#include "examples/common/mixed_precision.h"
#include <memgrad/nn/gpt.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/state_dict.h>

namespace gpt {

struct RunState {
  int64_t step = 0;         // optimizer steps done
  int64_t total_steps = 0;  // the schedule's length: a resumed run must have the same
  mg::PhiloxState windows{};  // the training windows' generator
  mg::PhiloxState dropout{};  // the process-wide generator that dropout draws from
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

// `optimizer_state`: examples::checkpoint_state's (ZeRO-1's consolidated state included).
void save_checkpoint(const std::string& path, const mg::nn::GPT& model,
                     const mg::optim::OptimizerStateDict& optimizer_state, const examples::MixedPrecision& precision,
                     const RunState& state);
// The same for a plain optimizer (one process): its optim::state_dict.
void save_checkpoint(const std::string& path, const mg::nn::GPT& model, const mg::optim::Optimizer& optimizer,
                     const examples::MixedPrecision& precision, const RunState& state);

// Loads `path` into `model`, `optimizer` and the precision's scaler (built as when the
// file was saved) and returns the run's state. Throws mg::Error naming the file when it
// does not fit, or was saved by a run of another length than `total_steps`.
RunState load_checkpoint(const std::string& path, mg::nn::GPT& model, mg::optim::Optimizer& optimizer,
                         examples::MixedPrecision& precision, int64_t total_steps);

}  // namespace gpt
