// examples/common/run_checkpoint.h — one file that lets a training run stop and continue
// exactly: a safetensors file holding
//
//   model.<key>        the model's state_dict (parameters and buffers)
//   optimizer.<key>    the optimizer's state dict (optim/state_dict.h)
//   scaler.<key>       the GradScaler's state (--amp fp16 only; amp/grad_scaler.h)
//   run.<field>        where the run stands (steps done, best loss, generator states, ...:
//                      each program's own fields), as int64 / float64 tensors so that they
//                      read back exactly
//
// with {"format": "pt", "optimizer": "AdamW", "model": "<name>", "amp": "fp32"} as metadata
// (a run resumes in the precision it was saved in). Written atomically (safetensors saves
// through a temporary file): an interrupted save leaves the previous file.
//
// In a data-parallel run the file is the same whatever the number of ranks: the model
// without DDP's "module." prefix, the optimizer's whole state (ZeRO-1's consolidated:
// distributed_run.h's checkpoint_state), written by rank 0; every rank loads it whole (a
// ZeRO-1 optimizer keeps its shard), so it resumes on any number of ranks, or on one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <memgrad/core/dtype.h>
#include <memgrad/core/tensor.h>
#include "examples/common/mixed_precision.h"
#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/state_dict.h>

namespace examples {

using NamedTensors = std::vector<std::pair<std::string, mg::Tensor>>;

// run.* values as the file stores them: 0-d int64, 0-d float64, 1-d float64 and 1-d int64.
mg::Tensor run_integer(int64_t value);
mg::Tensor run_real(double value);
mg::Tensor run_reals(const std::vector<double>& values);
mg::Tensor run_integers(const std::vector<int64_t>& values);

// The run.* entries of a checkpoint by field, checked for their dtype and rank as they
// are read; errors name the file and the field.
class RunFields {
 public:
  RunFields(std::map<std::string, mg::Tensor> fields, std::string path)
      : fields_(std::move(fields)), path_(std::move(path)) {}

  int64_t integer(const std::string& field) const;
  double real(const std::string& field) const;
  std::vector<double> reals(const std::string& field) const;
  std::vector<int64_t> integers(const std::string& field) const;

 private:
  mg::Tensor take(const std::string& field, mg::DType dtype, int dims) const;

  std::map<std::string, mg::Tensor> fields_;
  std::string path_;
};

// Writes the model, the optimizer's state (checkpoint_state's), the precision's scaler and
// `run` (field names without the "run." prefix) to `path`.
void save_run_checkpoint(const std::string& path, const std::string& model_name, const mg::nn::Module& model,
                         const mg::optim::OptimizerStateDict& optimizer_state, const MixedPrecision& precision,
                         const NamedTensors& run);

// Loads `path` into `model`, `optimizer` and the precision's scaler (built as when the file
// was saved). `read_run` is handed the run.* fields first, so that a missing or mistyped
// field (or a run that does not fit the command line: it may throw) is refused before
// anything is loaded. Throws mg::Error naming the file when the file does not fit.
void load_run_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                         mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                         const std::function<void(const RunFields&)>& read_run);

}  // namespace examples
