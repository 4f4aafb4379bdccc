// examples/common/run_checkpoint.h — the example programs' checkpoint file: what
// mg::save_checkpoint writes (training/checkpoint.h: model.*, optimizer.*, scaler.*,
// scheduler.*, rng.*, run.step, run.epoch) with the program's own run.<field>s (best loss,
// histories, ...: int64 / float64 tensors, so that they read back exactly) and
// {"model": "<name>", "amp": "fp32"} among the metadata (a run resumes in the precision it
// was saved in; a checkpoint of another program is refused).
//
// --resume FILE continues the run saved in FILE exactly: every part is restored, and the
// file is checked against the command line (the model, the precision, the program's own
// fields) before anything changes. --init-from FILE starts a new run from the model's
// weights alone: a fresh optimizer, schedule and step 0 (fine-tuning, or a longer run).
//
// In a data-parallel run the file is the same whatever the number of ranks: the model
// without DDP's "module." prefix, the optimizer's whole state (ZeRO-1's consolidated:
// distributed_run.h's checkpoint_state), rank 0's generators, written by rank 0; every rank
// loads it whole (a ZeRO-1 optimizer keeps its shard, each rank's generators continue from
// rank 0's offsets with their own seeds), so it resumes on any number of ranks, or on one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <memgrad/core/dtype.h>
#include <memgrad/core/tensor.h>
#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/training/checkpoint.h>
#include "examples/common/mixed_precision.h"

namespace examples {

class DistributedRun;

using NamedTensors = std::vector<std::pair<std::string, mg::Tensor>>;

// run.* values as the file stores them: 0-d int64, 0-d float64, 1-d float64 and 1-d int64.
mg::Tensor run_integer(int64_t value);
mg::Tensor run_real(double value);
mg::Tensor run_reals(const std::vector<double>& values);
mg::Tensor run_integers(const std::vector<int64_t>& values);

// A loaded checkpoint's step, epoch and run.* fields, each field checked for its dtype and
// rank as it is read; errors name the file and the field.
class RunFields {
 public:
  explicit RunFields(const mg::Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  int64_t step() const { return checkpoint_.step; }
  int64_t epoch() const { return checkpoint_.epoch; }
  const std::string& path() const { return checkpoint_.path; }
  int64_t integer(const std::string& field) const;
  double real(const std::string& field) const;
  std::vector<double> reals(const std::string& field) const;
  std::vector<int64_t> integers(const std::string& field) const;

 private:
  mg::Tensor take(const std::string& field, mg::DType dtype, int dims) const;

  const mg::Checkpoint& checkpoint_;
};

// Writes `parts` (the model, the optimizer's state as checkpoint_state gave it, the
// scheduler, step, epoch, generators of the program's own and its run.* fields in
// parts.tensors) with the precision's scaler and the program's metadata to `path`.
void save_run_checkpoint(const std::string& path, const std::string& model_name, const MixedPrecision& precision,
                         mg::CheckpointParts parts);

// --resume: loads `path` into `targets` (the model, the scheduler, generators of the
// program's own), `optimizer` (examples::load_checkpoint_state: ZeRO-1 keeps its shard) and
// the precision's scaler, all built as when the file was saved, and the default generator;
// then gives each restored generator this rank's seed (rank 0's stream in the file,
// distributed.rank_seed of it here). `read_run` is handed the step, epoch and run.* fields
// first, so that a missing or mistyped field, or a run that does not fit the command line
// (it may throw), is refused before anything is loaded. Throws mg::Error naming the file.
void load_run_checkpoint(const std::string& path, const std::string& model_name, mg::CheckpointTargets targets,
                         mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                         const DistributedRun& distributed, const std::function<void(const RunFields&)>& read_run);

// Whether a file's __metadata__ (read_safetensors_metadata: every key) is that of a
// checkpoint the examples wrote before 2026-12-07 (commit 875b42c or earlier): model.*,
// optimizer.*, scaler.* and run.* entries without mg::save_checkpoint's marker, schedule or
// generator states. Such a file cannot resume a run; --init-from takes its weights.
bool is_pre_library_checkpoint(const mg::CheckpointMetadata& file_metadata);

// Throws mg::Error unless the checkpoint `path`'s `metadata` names `model_name` (a
// checkpoint of another program, or a file that is no program's checkpoint, is refused).
void check_checkpoint_model(const std::string& path, const mg::CheckpointMetadata& metadata,
                            const std::string& model_name);

}  // namespace examples
