// examples/resnet/checkpoint.h — where a resnet training run stands, and its checkpoint
// file (examples/common/run_checkpoint.h: the model, the optimizer, the scaler, the
// one-cycle schedule, the epochs done as the checkpoint's epoch and the optimizer steps as
// its step, and these run.* fields). Saved after every epoch; the model's name
// ("resnet18", ...) is the file's "model" metadata, so that a checkpoint of another model
// is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/distributed_run.h"
#include "examples/common/mixed_precision.h"
#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/scheduler.h>
#include <memgrad/optim/state_dict.h>

namespace resnet {

struct RunProgress {
  int64_t epochs_done = 0;
  int64_t scheduler_steps = 0;
  // The schedule's length (epochs x batches per epoch): a resumed run must have the same.
  int64_t total_steps = 0;
  double best_accuracy = 0;
  int64_t best_epoch = 0;           // from 1; 0 before the first evaluation
  double seconds = 0;               // training and evaluation so far
  double seconds_to_best = 0;       // `seconds` when best_accuracy was first reached
  std::vector<double> test_accuracy;      // one per epoch done
  std::vector<double> seconds_per_epoch;  // one per epoch done
};

void save_checkpoint(const std::string& path, const std::string& model_name, const mg::nn::Module& model,
                     const mg::optim::OptimizerStateDict& optimizer_state, const examples::MixedPrecision& precision,
                     const mg::optim::LRScheduler& scheduler, const RunProgress& progress);

// Loads `path` into `model`, `optimizer`, the precision's scaler and `scheduler` (built as
// when the file was saved) and returns the run's progress. Throws mg::Error naming the
// file when it does not fit.
RunProgress load_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                            mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                            mg::optim::LRScheduler& scheduler, const examples::DistributedRun& distributed);

}  // namespace resnet
