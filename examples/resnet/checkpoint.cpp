// examples/resnet/checkpoint.cpp — the training run's checkpoint file.
#include "examples/resnet/checkpoint.h"

#include <map>
#include <utility>

#include "core/error.h"
#include "core/factory.h"
#include "core/safetensors.h"
#include "optim/state_dict.h"

namespace resnet {
namespace {

using NamedTensors = std::vector<std::pair<std::string, mg::Tensor>>;

const std::string kModelPrefix = "model.", kOptimizerPrefix = "optimizer.", kScalerPrefix = "scaler.",
                  kRunPrefix = "run.";

mg::Tensor int_tensor(int64_t value) { return mg::scalar_tensor(static_cast<double>(value), {.dtype = mg::DType::Int64}); }
mg::Tensor real_tensor(double value) { return mg::scalar_tensor(value, {.dtype = mg::DType::Float64}); }
mg::Tensor real_list(const std::vector<double>& values) {
  return mg::from_vector(values, {static_cast<int64_t>(values.size())});
}

// The run.* entries by field, checked for their dtype and rank as they are read.
class RunFields {
 public:
  RunFields(std::map<std::string, mg::Tensor> fields, std::string path)
      : fields_(std::move(fields)), path_(std::move(path)) {}

  mg::Tensor take(const std::string& field, mg::DType dtype, int dims) {
    auto found = fields_.find(field);
    MG_CHECK(found != fields_.end(), "checkpoint '", path_, "' has no \"", kRunPrefix, field,
             "\". Hint: resume from a file written by this program's --save.");
    const mg::Tensor tensor = found->second;
    MG_CHECK(tensor.dtype() == dtype && tensor.dim() == dims, "checkpoint '", path_, "': \"", kRunPrefix, field,
             "\" is ", tensor.sizes(), " ", tensor.dtype(), " but should be ", dims, "-d ", dtype, ".");
    return tensor;
  }
  int64_t integer(const std::string& field) { return take(field, mg::DType::Int64, 0).item<int64_t>(); }
  double real(const std::string& field) { return take(field, mg::DType::Float64, 0).item<double>(); }
  std::vector<double> reals(const std::string& field) { return take(field, mg::DType::Float64, 1).to_vector<double>(); }

 private:
  std::map<std::string, mg::Tensor> fields_;
  std::string path_;
};

}  // namespace

void save_checkpoint(const std::string& path, const std::string& model_name, const mg::nn::Module& model,
                     const mg::optim::Optimizer& optimizer, const examples::MixedPrecision& precision,
                     const RunProgress& progress) {
  NamedTensors tensors;
  for (auto& [key, tensor] : model.state_dict()) tensors.emplace_back(kModelPrefix + key, tensor);
  const mg::optim::OptimizerStateDict optimizer_state = mg::optim::state_dict(optimizer);
  for (auto& [key, tensor] : optimizer_state.tensors) tensors.emplace_back(kOptimizerPrefix + key, tensor);
  // NOTE: the scaler's keys carry their own "scaler." prefix.
  for (auto& entry : precision.scaler().state_dict()) tensors.push_back(entry);
  const std::pair<std::string, mg::Tensor> run[] = {
      {"epochs_done", int_tensor(progress.epochs_done)},
      {"scheduler_steps", int_tensor(progress.scheduler_steps)},
      {"total_steps", int_tensor(progress.total_steps)},
      {"best_accuracy", real_tensor(progress.best_accuracy)},
      {"best_epoch", int_tensor(progress.best_epoch)},
      {"seconds", real_tensor(progress.seconds)},
      {"seconds_to_best", real_tensor(progress.seconds_to_best)},
      {"test_accuracy", real_list(progress.test_accuracy)},
      {"seconds_per_epoch", real_list(progress.seconds_per_epoch)},
  };
  for (const auto& [field, tensor] : run) tensors.emplace_back(kRunPrefix + field, tensor);
  mg::save_safetensors(path, tensors,
                       {{"format", "pt"},
                        {"optimizer", optimizer_state.kind},
                        {"model", model_name},
                        {"amp", examples::amp_name(precision.dtype())}});
}

RunProgress load_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                            mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision) {
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
  const std::string amp = examples::amp_name(precision.dtype());
  MG_CHECK(saved_amp == amp, "checkpoint '", path, "' was saved by a run with --amp ", saved_amp, "; this run has --amp ",
           amp, ". Hint: resume with the --amp the run started with.");

  // Read onto the model's device, so that the copies into parameters and state stay there.
  const NamedTensors model_tensors = model.state_dict();
  const mg::Device device = model_tensors.empty() ? mg::Device::cpu() : model_tensors.front().second.device();
  NamedTensors model_state, scaler_state;
  std::map<std::string, mg::Tensor> run_fields;
  for (auto& [key, tensor] : mg::load_safetensors(path, device)) {
    if (key.rfind(kModelPrefix, 0) == 0) {
      model_state.emplace_back(key.substr(kModelPrefix.size()), tensor);
    } else if (key.rfind(kOptimizerPrefix, 0) == 0) {
      optimizer_state.tensors.emplace_back(key.substr(kOptimizerPrefix.size()), tensor);
    } else if (key.rfind(kScalerPrefix, 0) == 0) {
      scaler_state.emplace_back(key, tensor);
    } else if (key.rfind(kRunPrefix, 0) == 0) {
      run_fields.emplace(key.substr(kRunPrefix.size()), tensor.to(mg::Device::cpu()));
    } else {
      MG_CHECK(false, "checkpoint '", path, "': unexpected entry \"", key, "\" (expected model.*, optimizer.*, scaler.* or run.*).");
    }
  }

  RunFields fields(std::move(run_fields), path);
  RunProgress progress;
  progress.epochs_done = fields.integer("epochs_done");
  progress.scheduler_steps = fields.integer("scheduler_steps");
  progress.total_steps = fields.integer("total_steps");
  progress.best_accuracy = fields.real("best_accuracy");
  progress.best_epoch = fields.integer("best_epoch");
  progress.seconds = fields.real("seconds");
  progress.seconds_to_best = fields.real("seconds_to_best");
  progress.test_accuracy = fields.reals("test_accuracy");
  progress.seconds_per_epoch = fields.reals("seconds_per_epoch");

  // NOTE: each load checks its whole part before copying, but if the optimizer's part is
  // refused after the model's was taken, the model keeps the checkpoint's values.
  try {
    model.load_state_dict(model_state);
  } catch (const mg::Error& error) {
    throw mg::Error(mg::detail::str_cat("loading checkpoint '", path, "' into ", model.type_name(), ": ", error.what()));
  }
  mg::optim::load_state_dict(optimizer, optimizer_state, "checkpoint '" + path + "'");
  precision.scaler().load_state_dict(scaler_state, "checkpoint '" + path + "'");
  return progress;
}

}  // namespace resnet
