// examples/common/run_checkpoint.cpp — the example programs' checkpoints on top of
// mg::save_checkpoint / mg::load_checkpoint: the program's metadata and run.* fields,
// ZeRO-1's optimizer, each rank's generators.
#include "examples/common/run_checkpoint.h"

#include "examples/common/distributed_run.h"
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/safetensors.h>

namespace examples {
namespace {

const std::string kModelKey = "model", kAmpKey = "amp";  // the programs' own metadata

// The value of `key` in `metadata`, or "" when it has none.
std::string metadata_value(const mg::CheckpointMetadata& metadata, const std::string& key) {
  for (const auto& [saved, value] : metadata) {
    if (saved == key) return value;
  }
  return "";
}

}  // namespace

bool is_pre_library_checkpoint(const mg::CheckpointMetadata& file_metadata) {
  return !metadata_value(file_metadata, kModelKey).empty() &&
         metadata_value(file_metadata, "memgrad_checkpoint").empty();
}

void check_checkpoint_model(const std::string& path, const mg::CheckpointMetadata& metadata,
                            const std::string& model_name) {
  const std::string saved_model = metadata_value(metadata, kModelKey);
  MG_CHECK(!saved_model.empty(), "'", path, "' is not a checkpoint of this program: its metadata names no model. ",
           "Hint: --resume and --init-from take a file written by --save.");
  MG_CHECK(saved_model == model_name, "checkpoint '", path, "' holds a ", saved_model, ", not a ", model_name, ".");
}

mg::Tensor run_integer(int64_t value) {
  // NOTE: through from_vector, not scalar_tensor's double, so that every int64 survives.
  return mg::from_vector(std::vector<int64_t>{value}, {1}).view({});
}
mg::Tensor run_real(double value) { return mg::scalar_tensor(value, {.dtype = mg::DType::Float64}); }
mg::Tensor run_reals(const std::vector<double>& values) {
  return mg::from_vector(values, {static_cast<int64_t>(values.size())});
}
mg::Tensor run_integers(const std::vector<int64_t>& values) {
  return mg::from_vector(values, {static_cast<int64_t>(values.size())});
}

mg::Tensor RunFields::take(const std::string& field, mg::DType dtype, int dims) const {
  const mg::Tensor& tensor = checkpoint_.tensor(field);
  MG_CHECK(tensor.dtype() == dtype && tensor.dim() == dims, "checkpoint '", checkpoint_.path, "': \"run.", field,
           "\" is ", tensor.sizes(), " ", tensor.dtype(), " but should be ", dims, "-d ", dtype, ".");
  return tensor;
}
int64_t RunFields::integer(const std::string& field) const {
  return take(field, mg::DType::Int64, 0).item<int64_t>();
}
double RunFields::real(const std::string& field) const { return take(field, mg::DType::Float64, 0).item<double>(); }
std::vector<double> RunFields::reals(const std::string& field) const {
  return take(field, mg::DType::Float64, 1).to_vector<double>();
}
std::vector<int64_t> RunFields::integers(const std::string& field) const {
  return take(field, mg::DType::Int64, 1).to_vector<int64_t>();
}

void save_run_checkpoint(const std::string& path, const std::string& model_name, const MixedPrecision& precision,
                         mg::CheckpointParts parts) {
  parts.scaler = &precision.scaler();
  parts.metadata.emplace_back(kModelKey, model_name);
  parts.metadata.emplace_back(kAmpKey, amp_name(precision.dtype()));
  mg::save_checkpoint(path, parts);
}

void load_run_checkpoint(const std::string& path, const std::string& model_name, mg::CheckpointTargets targets,
                         mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                         const DistributedRun& distributed, const std::function<void(const RunFields&)>& read_run) {
  MG_CHECK(!is_pre_library_checkpoint(mg::read_safetensors_metadata(path)), "checkpoint '", path,
           "' was written by this program before 2026-12-07 (commit 875b42c or earlier), without the schedule and ",
           "generator states a run needs to continue exactly. Hint: start a new run from its weights with ",
           "--init-from ", path, ".");
  targets.load_optimizer = [&](const mg::optim::OptimizerStateDict& state, const std::string& source) {
    load_checkpoint_state(optimizer, state, source);
  };
  targets.scaler = &precision.scaler();
  targets.default_generator = true;
  targets.check = [&](const mg::Checkpoint& checkpoint) {
    check_checkpoint_model(path, checkpoint.metadata, model_name);
    const std::string saved_amp = metadata_value(checkpoint.metadata, kAmpKey);
    const std::string amp = amp_name(precision.dtype());
    MG_CHECK(saved_amp == amp, "checkpoint '", path, "' was saved by a run with --amp ", saved_amp,
             "; this run has --amp ", amp, ". Hint: resume with the --amp the run started with.");
    read_run(RunFields(checkpoint));
  };
  mg::load_checkpoint(path, targets);

  // NOTE: the file holds rank 0's streams; every rank draws as many numbers per step, so
  // rank r continues its own stream (its seed from rank 0's) at the same offset.
  std::vector<mg::Generator*> generators = {&mg::default_generator()};
  for (const auto& [name, generator] : targets.generators) generators.push_back(generator);
  for (mg::Generator* generator : generators) {
    const mg::PhiloxState state = generator->state();
    generator->set_state({.seed = distributed.rank_seed(state.seed), .offset = state.offset});
  }
}

}  // namespace examples
