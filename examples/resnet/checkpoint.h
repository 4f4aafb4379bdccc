// examples/resnet/checkpoint.h — one file that lets a training run stop and continue
// exactly: a safetensors file holding
//
//   model.<key>        the model's state_dict (parameters and BatchNorm buffers)
//   optimizer.<key>    the optimizer's state dict (optim/state_dict.h)
//   scaler.<key>       the GradScaler's state (--amp fp16 only; amp/grad_scaler.h)
//   run.<field>        where the run stands (epochs done, scheduler steps, best accuracy,
//                      times), as int64 / float64 tensors so that they read back exactly
//
// with {"format": "pt", "optimizer": "SGD", "model": "resnet18", "amp": "fp32"} as
// metadata (a run resumes in the precision it was saved in). Written
// atomically after every epoch: an interrupted save leaves the previous epoch's file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "examples/common/mixed_precision.h"
#include "nn/module.h"
#include "optim/optimizer.h"

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
                     const mg::optim::Optimizer& optimizer, const examples::MixedPrecision& precision,
                     const RunProgress& progress);

// Loads `path` into `model`, `optimizer` and the precision's scaler (built as when the file
// was saved) and returns the run's progress. Throws mg::Error naming the file when it does
// not fit.
RunProgress load_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                            mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision);

}  // namespace resnet
