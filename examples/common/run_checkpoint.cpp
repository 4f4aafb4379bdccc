// examples/common/run_checkpoint.cpp — a training run's checkpoint file: model, optimizer,
// scaler and the program's run.* fields.
#include "examples/common/run_checkpoint.h"

#include "examples/common/distributed_run.h"
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/safetensors.h>
#include <memgrad/optim/state_dict.h>

namespace examples {
namespace {

const std::string kModelPrefix = "model.", kOptimizerPrefix = "optimizer.", kScalerPrefix = "scaler.",
                  kRunPrefix = "run.";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

mg::Tensor run_integer(int64_t value) {
  // NOTE: through from_vector, not scalar_tensor's double, so that every int64 (a
  // generator's 64-bit seed) survives.
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
  auto found = fields_.find(field);
  MG_CHECK(found != fields_.end(), "checkpoint '", path_, "' has no \"", kRunPrefix, field,
           "\". Hint: resume from a file written by this program's --save.");
  const mg::Tensor tensor = found->second;
  MG_CHECK(tensor.dtype() == dtype && tensor.dim() == dims, "checkpoint '", path_, "': \"", kRunPrefix, field,
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

void save_run_checkpoint(const std::string& path, const std::string& model_name, const mg::nn::Module& model,
                         const mg::optim::OptimizerStateDict& optimizer_state, const MixedPrecision& precision,
                         const NamedTensors& run) {
  NamedTensors tensors;
  for (auto& [key, tensor] : model.state_dict()) tensors.emplace_back(kModelPrefix + key, tensor);
  for (auto& [key, tensor] : optimizer_state.tensors) tensors.emplace_back(kOptimizerPrefix + key, tensor);
  // NOTE: the scaler's keys carry their own "scaler." prefix.
  for (auto& entry : precision.scaler().state_dict()) tensors.push_back(entry);
  for (const auto& [field, tensor] : run) tensors.emplace_back(kRunPrefix + field, tensor);
  mg::save_safetensors(path, tensors,
                       {{"format", "pt"},
                        {"optimizer", optimizer_state.kind},
                        {"model", model_name},
                        {"amp", amp_name(precision.dtype())}});
}

void load_run_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                         mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                         const std::function<void(const RunFields&)>& read_run) {
  mg::optim::OptimizerStateDict optimizer_state;
  std::string saved_model, saved_amp = "fp32";
  for (const auto& [key, value] : mg::read_safetensors_metadata(path)) {
    if (key == "optimizer") optimizer_state.kind = value;
    if (key == "model") saved_model = value;
    if (key == "amp") saved_amp = value;
  }
  MG_CHECK(!saved_model.empty() && !optimizer_state.kind.empty(), "'", path, "' is not a checkpoint of this ",
           "program: its metadata names no model and optimizer. Hint: --resume takes a file written by --save.");
  MG_CHECK(saved_model == model_name, "checkpoint '", path, "' holds a ", saved_model, ", not a ", model_name, ".");
  const std::string amp = amp_name(precision.dtype());
  MG_CHECK(saved_amp == amp, "checkpoint '", path, "' was saved by a run with --amp ", saved_amp, "; this run has --amp ",
           amp, ". Hint: resume with the --amp the run started with.");

  // Read onto the model's device, so that the copies into parameters and state stay there.
  const NamedTensors model_tensors = model.state_dict();
  const mg::Device device = model_tensors.empty() ? mg::Device::cpu() : model_tensors.front().second.device();
  NamedTensors model_state, scaler_state;
  std::map<std::string, mg::Tensor> run_fields;
  for (auto& [key, tensor] : mg::load_safetensors(path, device)) {
    if (starts_with(key, kModelPrefix)) {
      model_state.emplace_back(key.substr(kModelPrefix.size()), tensor);
    } else if (starts_with(key, kOptimizerPrefix)) {
      optimizer_state.tensors.emplace_back(key.substr(kOptimizerPrefix.size()), tensor);
    } else if (starts_with(key, kScalerPrefix)) {
      scaler_state.emplace_back(key, tensor);
    } else if (starts_with(key, kRunPrefix)) {
      run_fields.emplace(key.substr(kRunPrefix.size()), tensor.to(mg::Device::cpu()));
    } else {
      MG_CHECK(false, "checkpoint '", path, "': unexpected entry \"", key,
               "\" (expected model.*, optimizer.*, scaler.* or run.*).");
    }
  }
  read_run(RunFields(std::move(run_fields), path));

  // NOTE: each load checks its whole part before copying, but if the optimizer's part is
  // refused after the model's was taken, the model keeps the checkpoint's values.
  try {
    model.load_state_dict(model_state);
  } catch (const mg::Error& error) {
    throw mg::Error(mg::detail::str_cat("loading checkpoint '", path, "' into ", model.type_name(), ": ", error.what()));
  }
  load_checkpoint_state(optimizer, optimizer_state, "checkpoint '" + path + "'");
  precision.scaler().load_state_dict(scaler_state, "checkpoint '" + path + "'");
}

}  // namespace examples
