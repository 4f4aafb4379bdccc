// training/checkpoint.h — a whole training state in one safetensors file, saved and
// restored in one call each: what PyTorch users write as
//
//   torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
//               "scaler": scaler.state_dict(), "scheduler": scheduler.state_dict(),
//               "rng": torch.get_rng_state(), "step": step, "epoch": epoch}, path)
//
// is here
//
//   mg::save_checkpoint(path, {.model = &model, .optimizer = &optimizer, .scaler = &scaler,
//                              .scheduler = &scheduler, .step = step, .epoch = epoch,
//                              .metadata = {{"note", "lr sweep 3"}}});
//   mg::Checkpoint loaded = mg::load_checkpoint(path, {.model = &model, .optimizer = &optimizer,
//                                                      .scaler = &scaler, .scheduler = &scheduler});
//   // loaded.step, loaded.epoch, loaded.metadata, loaded.tensors
//
// Every part but the model is optional, on both sides: a load restores the parts it is
// given and leaves the file's others unread (load only .model to fine-tune from a run's
// weights), and refuses a part it is given that the file lacks.
//
// The file's entries (names as PyTorch users would index the dict, flattened with dots):
//   model.<key>         the model's state_dict (parameters and buffers)
//   optimizer.<key>     the optimizer's state dict (optim/state_dict.h: state.<i>.<entry>,
//                       param_groups.<g>.<name>, every group)
//   scaler.<name>       the GradScaler's state_dict (amp/grad_scaler.h; none when disabled)
//   scheduler.<key>     the LR scheduler's state_dict (optim/scheduler.h: last_epoch,
//                       base_lrs, last_lrs, and a subclass's own)
//   rng.default         mg::default_generator()'s (seed, offset), 1-d int64 of 2 holding
//                       the two uint64s' bits; memgrad has one default generator for every
//                       device (counter-based: CPU and CUDA kernels draw the same numbers,
//                       core/random.h), so there is no separate CUDA state
//   rng.<name>          a generator of the caller's own (a data order, augmentation), same form
//   run.step, run.epoch 0-d int64
//   run.<name>          the caller's own tensors (a best loss, a history), as given
// and its __metadata__ {"format": "pt", "memgrad_checkpoint": "1", "optimizer": "<kind>"}
// plus the caller's string pairs, so that safetensors.torch.load_file reads it as it is
// (interop/check_training_checkpoint.py checks that PyTorch does).
//
// The file also carries the CRC-32 of its tensor data (io/safetensors.h's "memgrad_crc32"),
// which loading checks: a checkpoint whose bytes changed since it was saved is refused with
// an mg::Error naming the file and both checksums. A checkpoint without one (saved before
// 2026-12-07) loads as before.
//
// Saving is atomic (a temporary file, synced, renamed over `path`, the directory synced: an
// interrupted or failed save, even a SIGKILL, leaves the previous file). Loading checks every part it restores — names, shapes,
// dtypes, the optimizer's kind, groups and hyper-parameters, the scaler's options — before
// it changes any: a file that does not fit changes nothing and throws an mg::Error naming
// the file, the entry and what was expected, with a hint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/amp/grad_scaler.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"
#include "memgrad/nn/module.h"
#include "memgrad/optim/optimizer.h"
#include "memgrad/optim/scheduler.h"
#include "memgrad/optim/state_dict.h"

namespace mg {

using CheckpointMetadata = std::vector<std::pair<std::string, std::string>>;
using CheckpointTensors = std::vector<std::pair<std::string, Tensor>>;

// What save_checkpoint writes. Pointers are the caller's; null leaves a part out.
struct CheckpointParts {
  const nn::Module* model = nullptr;  // required
  const optim::Optimizer* optimizer = nullptr;
  // In place of `optimizer`: a state dict made elsewhere, such as the whole state of a
  // distributed::ZeroRedundancyOptimizer (consolidate_state_dict, on the rank that writes).
  const optim::OptimizerStateDict* optimizer_state = nullptr;
  const amp::GradScaler* scaler = nullptr;
  const optim::LRScheduler* scheduler = nullptr;
  // mg::default_generator() (dropout and every draw without a generator of its own).
  bool default_generator = true;
  // Generators of the caller's own, by name (not "default").
  std::vector<std::pair<std::string, const Generator*>> generators = {};
  int64_t step = 0;
  int64_t epoch = 0;
  // String pairs of the caller's own (not "format", "memgrad_checkpoint" or "optimizer").
  CheckpointMetadata metadata = {};
  // Tensors of the caller's own, saved as run.<name> (not "step" or "epoch").
  CheckpointTensors tensors = {};
};

struct Checkpoint;

// Where load_checkpoint restores each part. Null leaves the file's part unread.
struct CheckpointTargets {
  nn::Module* model = nullptr;  // required
  bool strict = true;           // the model's keys must match exactly (Module::load_state_dict)
  optim::Optimizer* optimizer = nullptr;
  // In place of `optimizer`: takes the file's optimizer state its own way (a
  // distributed::ZeroRedundancyOptimizer keeps its shard). Called once every other part was
  // checked and before any is changed; it must itself check before it changes anything, as
  // optim::load_state_dict does; if it throws, nothing has changed.
  std::function<void(const optim::OptimizerStateDict& state, const std::string& source)> load_optimizer = {};
  amp::GradScaler* scaler = nullptr;  // a disabled scaler takes nothing, as its load_state_dict
  optim::LRScheduler* scheduler = nullptr;
  bool default_generator = true;  // restore mg::default_generator()
  std::vector<std::pair<std::string, Generator*>> generators = {};
  // Called with what load_checkpoint will return (step, epoch, metadata, the caller's
  // tensors) before any part is checked or changed: throws to refuse a file that does not
  // fit the run (another model's name in the metadata, a run of another length), which then
  // changes nothing.
  std::function<void(const Checkpoint& checkpoint)> check = {};
};

// What a checkpoint holds besides the parts restored.
struct Checkpoint {
  std::string path;
  int64_t step = 0;
  int64_t epoch = 0;
  CheckpointMetadata metadata;  // the caller's pairs, as saved
  CheckpointTensors tensors;    // the caller's run.<name> tensors (names without "run."), on the CPU

  // The value saved under `key`, or an mg::Error naming the file and the key.
  const std::string& metadata_value(const std::string& key) const;
  // The tensor saved as run.<name>, or an mg::Error naming the file and the entry.
  const Tensor& tensor(const std::string& name) const;
};

void save_checkpoint(const std::string& path, const CheckpointParts& parts);
Checkpoint load_checkpoint(const std::string& path, const CheckpointTargets& targets);

}  // namespace mg
