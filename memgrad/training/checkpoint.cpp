// training/checkpoint.cpp — a training state's parts under their prefixes in one
// safetensors file; a load checks every part it restores, then changes them all.
#include "memgrad/training/checkpoint.h"

#include <bit>
#include <map>
#include <optional>
#include <set>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/io/safetensors.h"
#include "memgrad/nn/check_state_dict.h"

namespace mg {
namespace {

const std::string kModel = "model.", kOptimizer = "optimizer.", kScaler = "scaler.", kScheduler = "scheduler.",
                  kRng = "rng.", kRun = "run.";
const std::string kDefaultGenerator = "default";
// The __metadata__ keys memgrad writes; a caller's pairs may not use them.
const std::string kFormatKey = "format", kMarkerKey = "memgrad_checkpoint", kOptimizerKey = "optimizer";
const std::string kMarkerVersion = "1";

bool is_reserved_metadata(const std::string& key) {
  return key == kFormatKey || key == kMarkerKey || key == kOptimizerKey;
}

std::string source_of(const std::string& path) { return "checkpoint '" + path + "'"; }
// How errors name one part of the file: its entries' names lack the prefix there.
std::string part_source(const std::string& path, const std::string& prefix) {
  return source_of(path) + " (its \"" + prefix + "*\" entries)";
}

// A generator's (seed, offset) as two int64 holding the same 64 bits each.
Tensor generator_entry(const Generator& generator) {
  const PhiloxState state = generator.state();
  return from_vector(std::vector<int64_t>{std::bit_cast<int64_t>(state.seed), std::bit_cast<int64_t>(state.offset)},
                     {2});
}

Tensor int64_scalar(int64_t value) {
  // NOTE: through from_vector, not scalar_tensor's double, so that every int64 survives.
  return from_vector(std::vector<int64_t>{value}, {1}).view({});
}

// The file's entries by part, their prefixes removed (the scaler's keep theirs, as its
// load_state_dict wants them).
struct FileParts {
  CheckpointTensors model, optimizer, scaler, scheduler;
  std::map<std::string, Tensor> rng, run;  // on the CPU
};

FileParts split_entries(const std::string& path, CheckpointTensors entries) {
  FileParts parts;
  for (auto& [key, tensor] : entries) {
    // NOTE: the key is passed, not captured: clang 14 cannot capture a structured binding.
    auto strip = [](const std::string& name, const std::string& prefix) { return name.substr(prefix.size()); };
    if (key.starts_with(kModel)) {
      parts.model.emplace_back(strip(key, kModel), std::move(tensor));
    } else if (key.starts_with(kOptimizer)) {
      parts.optimizer.emplace_back(strip(key, kOptimizer), std::move(tensor));
    } else if (key.starts_with(kScaler)) {
      parts.scaler.emplace_back(key, std::move(tensor));
    } else if (key.starts_with(kScheduler)) {
      parts.scheduler.emplace_back(strip(key, kScheduler), std::move(tensor));
    } else if (key.starts_with(kRng)) {
      parts.rng.emplace(strip(key, kRng), tensor.to(Device::cpu()));
    } else if (key.starts_with(kRun)) {
      parts.run.emplace(strip(key, kRun), tensor.to(Device::cpu()));
    } else {
      MG_CHECK(false, source_of(path), ": unexpected entry \"", key, "\" (a checkpoint holds model.*, optimizer.*, ",
               "scaler.*, scheduler.*, rng.* and run.* entries). Hint: was the file changed since mg::save_checkpoint ",
               "wrote it?");
    }
  }
  return parts;
}

int64_t read_int64_scalar(const std::string& path, const std::map<std::string, Tensor>& run, const std::string& name) {
  auto found = run.find(name);
  MG_CHECK(found != run.end(), source_of(path), " has no \"", kRun, name, "\" entry. Hint: was the file changed ",
           "since mg::save_checkpoint wrote it?");
  const Tensor& tensor = found->second;
  MG_CHECK(tensor.dim() == 0 && tensor.dtype() == DType::Int64, source_of(path), ": \"", kRun, name, "\" is ",
           tensor.sizes(), " ", tensor.dtype(), " but should be a 0-d int64 tensor.");
  return tensor.item<int64_t>();
}

PhiloxState read_generator(const std::string& path, const std::map<std::string, Tensor>& rng, const std::string& name) {
  auto found = rng.find(name);
  MG_CHECK(found != rng.end(), source_of(path), " has no \"", kRng, name, "\" entry (it holds ", rng.size(),
           " generator state", rng.size() == 1 ? "" : "s", "). Hint: restore only the generators the run saved, by ",
           "the names it saved them under", name == kDefaultGenerator ? " (or load with .default_generator = false)" : "",
           ".");
  const Tensor& tensor = found->second;
  MG_CHECK(tensor.sizes() == Shape{2} && tensor.dtype() == DType::Int64, source_of(path), ": \"", kRng, name,
           "\" is ", tensor.sizes(), " ", tensor.dtype(), " but a generator's state is [2] int64 (seed, offset).");
  const std::vector<int64_t> values = tensor.to_vector<int64_t>();
  return {.seed = std::bit_cast<uint64_t>(values[0]), .offset = std::bit_cast<uint64_t>(values[1])};
}

void check_generator_name(const std::string& name) {
  MG_CHECK(!name.empty() && name != kDefaultGenerator, "save_checkpoint/load_checkpoint: a generator of the caller's ",
           "own is named \"", name, "\"; names must be non-empty and not \"", kDefaultGenerator,
           "\". Hint: the default generator is saved with .default_generator = true.");
}

// Restores `scheduler` to `saved` when a later part of the load fails.
class SchedulerRollback {
 public:
  explicit SchedulerRollback(optim::LRScheduler* scheduler)
      : scheduler_(scheduler), saved_(scheduler ? scheduler->state_dict() : CheckpointTensors{}) {}
  ~SchedulerRollback() {
    if (scheduler_ != nullptr && !committed_) scheduler_->load_state_dict(saved_, "its own state");
  }
  void commit() { committed_ = true; }

 private:
  optim::LRScheduler* scheduler_;
  CheckpointTensors saved_;
  bool committed_ = false;
};

}  // namespace

const std::string& Checkpoint::metadata_value(const std::string& key) const {
  for (const auto& [saved_key, value] : metadata) {
    if (saved_key == key) return value;
  }
  throw Error(detail::str_cat(source_of(path), " has no metadata \"", key, "\" (it has ", metadata.size(),
                              " pairs of the caller's own). Hint: save it with .metadata = {{\"", key, "\", ...}}."));
}

const Tensor& Checkpoint::tensor(const std::string& name) const {
  for (const auto& [saved_name, tensor] : tensors) {
    if (saved_name == name) return tensor;
  }
  throw Error(detail::str_cat(source_of(path), " has no \"", kRun, name, "\" entry. Hint: save it with .tensors = ",
                              "{{\"", name, "\", ...}}."));
}

void save_checkpoint(const std::string& path, const CheckpointParts& parts) {
  MG_CHECK(parts.model != nullptr, "save_checkpoint('", path, "'): no model. Hint: pass .model = &model; every ",
           "other part is optional.");
  MG_CHECK(parts.optimizer == nullptr || parts.optimizer_state == nullptr, "save_checkpoint('", path,
           "'): both .optimizer and .optimizer_state are given. Hint: pass one (.optimizer_state is for a state ",
           "dict made elsewhere, such as ZeRO-1's consolidated one).");
  CheckpointMetadata metadata = {{kFormatKey, "pt"}, {kMarkerKey, kMarkerVersion}};
  std::set<std::string> metadata_keys;
  for (const auto& [key, value] : parts.metadata) {
    MG_CHECK(!is_reserved_metadata(key), "save_checkpoint('", path, "'): the metadata key \"", key,
             "\" is memgrad's own. Hint: choose another name (\"", kFormatKey, "\", \"", kMarkerKey, "\" and \"",
             kOptimizerKey, "\" are taken).");
    MG_CHECK(metadata_keys.insert(key).second, "save_checkpoint('", path, "'): the metadata key \"", key,
             "\" is given twice.");
  }

  CheckpointTensors entries;
  for (auto& [key, tensor] : parts.model->state_dict()) entries.emplace_back(kModel + key, std::move(tensor));
  std::optional<optim::OptimizerStateDict> own_state;
  if (parts.optimizer != nullptr) own_state = optim::state_dict(*parts.optimizer);
  if (const optim::OptimizerStateDict* state = own_state ? &*own_state : parts.optimizer_state) {
    metadata.emplace_back(kOptimizerKey, state->kind);
    for (const auto& [key, tensor] : state->tensors) entries.emplace_back(kOptimizer + key, tensor);
  }
  // NOTE: the scaler's keys carry their own "scaler." prefix.
  if (parts.scaler != nullptr) {
    for (auto& entry : parts.scaler->state_dict()) entries.push_back(std::move(entry));
  }
  if (parts.scheduler != nullptr) {
    for (auto& [key, tensor] : parts.scheduler->state_dict()) entries.emplace_back(kScheduler + key, std::move(tensor));
  }
  if (parts.default_generator) entries.emplace_back(kRng + kDefaultGenerator, generator_entry(default_generator()));
  for (const auto& [name, generator] : parts.generators) {
    check_generator_name(name);
    MG_CHECK(generator != nullptr, "save_checkpoint('", path, "'): the generator \"", name, "\" is null.");
    entries.emplace_back(kRng + name, generator_entry(*generator));
  }
  entries.emplace_back(kRun + "step", int64_scalar(parts.step));
  entries.emplace_back(kRun + "epoch", int64_scalar(parts.epoch));
  for (const auto& [name, tensor] : parts.tensors) {
    MG_CHECK(name != "step" && name != "epoch" && !name.empty(), "save_checkpoint('", path, "'): a tensor of the ",
             "caller's own is named \"", name, "\". Hint: \"step\" and \"epoch\" are the checkpoint's own (.step, ",
             ".epoch); choose another non-empty name.");
    MG_CHECK(tensor.defined(), "save_checkpoint('", path, "'): the tensor \"", name, "\" is undefined.");
    entries.emplace_back(kRun + name, tensor);
  }
  metadata.insert(metadata.end(), parts.metadata.begin(), parts.metadata.end());
  save_safetensors(path, entries, metadata, Checksum::Crc32);
}

Checkpoint load_checkpoint(const std::string& path, const CheckpointTargets& targets) {
  MG_CHECK(targets.model != nullptr, "load_checkpoint('", path, "'): no model. Hint: pass .model = &model; every ",
           "other part is optional.");
  MG_CHECK(targets.optimizer == nullptr || !targets.load_optimizer, "load_checkpoint('", path,
           "'): both .optimizer and .load_optimizer are given. Hint: pass one.");
  const std::string source = source_of(path);
  Checkpoint result;
  result.path = path;
  std::string optimizer_kind;
  bool marked = false;
  for (const auto& [key, value] : read_safetensors_metadata(path)) {
    if (key == kMarkerKey) marked = true;
    if (key == kOptimizerKey) optimizer_kind = value;
    if (!is_reserved_metadata(key)) result.metadata.emplace_back(key, value);
  }
  MG_CHECK(marked, "'", path, "' is not a checkpoint written by mg::save_checkpoint: its metadata has no \"",
           kMarkerKey, "\". Hint: a file of a model's weights alone (mg::nn::save, safetensors.torch.save_file) ",
           "loads with mg::nn::load.");

  // Read onto the model's device, so that the copies into parameters and state stay there.
  const CheckpointTensors model_tensors = targets.model->state_dict();
  const Device device = model_tensors.empty() ? Device::cpu() : model_tensors.front().second.device();
  FileParts file = split_entries(path, load_safetensors(path, device));

  // ---- check every part asked for; nothing changes here ----
  result.step = read_int64_scalar(path, file.run, "step");
  result.epoch = read_int64_scalar(path, file.run, "epoch");
  for (auto& [name, tensor] : file.run) {
    if (name != "step" && name != "epoch") result.tensors.emplace_back(name, tensor);
  }
  if (targets.check) targets.check(result);
  try {
    nn::check_state_dict(*targets.model, file.model, targets.strict);
  } catch (const Error& error) {
    throw Error(detail::str_cat("loading ", source, " into ", targets.model->type_name(), " (its \"", kModel,
                                "*\" entries): ", error.what(),
                                " Hint: the checkpoint holds another model, or this one of another size; build the ",
                                "model the checkpoint was saved from."));
  }
  const bool wants_optimizer = targets.optimizer != nullptr || targets.load_optimizer;
  optim::OptimizerStateDict optimizer_state{optimizer_kind, std::move(file.optimizer)};
  MG_CHECK(!wants_optimizer || !optimizer_kind.empty(), source, " holds no optimizer state. Hint: it was saved ",
           "without .optimizer; load it without one (a fresh optimizer starts from its options).");
  std::optional<optim::CheckedOptimizerState> checked_optimizer;
  if (targets.optimizer != nullptr) {
    checked_optimizer = optim::check_state_dict(*targets.optimizer, optimizer_state, part_source(path, kOptimizer));
  }
  const bool wants_scaler = targets.scaler != nullptr && targets.scaler->is_enabled();
  if (wants_scaler) {
    MG_CHECK(!file.scaler.empty(), source, " holds no GradScaler state. Hint: it was saved without .scaler (or ",
             "with a disabled one, as a float32 or bfloat16 run has); load it with a disabled scaler or none.");
    targets.scaler->check_state_dict(file.scaler, source);
  }
  MG_CHECK(targets.scheduler == nullptr || !file.scheduler.empty(), source, " holds no LR scheduler state. Hint: ",
           "it was saved without .scheduler; load it without one.");
  std::vector<std::pair<Generator*, PhiloxState>> generator_states;
  if (targets.default_generator) {
    generator_states.emplace_back(&default_generator(), read_generator(path, file.rng, kDefaultGenerator));
  }
  for (const auto& [name, generator] : targets.generators) {
    check_generator_name(name);
    MG_CHECK(generator != nullptr, "load_checkpoint('", path, "'): the generator \"", name, "\" is null.");
    generator_states.emplace_back(generator, read_generator(path, file.rng, name));
  }

  // ---- change them: the two parts that may still refuse first, then the checked ones ----
  // NOTE: a scheduler's load_state_dict checks and applies in one call (a subclass adds
  // its own state), so it goes first and is undone if the optimizer's own loader refuses.
  SchedulerRollback rollback(targets.scheduler);
  if (targets.scheduler != nullptr) targets.scheduler->load_state_dict(file.scheduler, part_source(path, kScheduler));
  if (targets.load_optimizer) targets.load_optimizer(optimizer_state, part_source(path, kOptimizer));
  rollback.commit();
  if (checked_optimizer) optim::apply_state_dict(*targets.optimizer, std::move(*checked_optimizer));
  targets.model->load_state_dict(file.model, targets.strict);
  if (wants_scaler) targets.scaler->load_state_dict(file.scaler, source);
  for (const auto& [generator, state] : generator_states) generator->set_state(state);
  return result;
}

}  // namespace mg
