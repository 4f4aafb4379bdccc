// optim/state_dict.cpp — optimizer state to and from named tensors, and its checkpoint files.
#include "memgrad/optim/state_dict.h"

#include <charconv>
#include <map>
#include <typeinfo>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/io/safetensors.h"
#include "memgrad/optim/adagrad.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/adam_8bit.h"
#include "memgrad/optim/offloaded_adam.h"
#include "memgrad/optim/sgd.h"

namespace mg::optim {
namespace {

constexpr const char* kKindKey = "optimizer";  // in the file's __metadata__

// The ParamState members under their state-dict names.
constexpr std::pair<const char*, Tensor ParamState::*> kStateEntries[] = {
    {"step", &ParamState::step},
    {"momentum_buffer", &ParamState::momentum_buffer},
    {"exp_avg", &ParamState::exp_avg},
    {"exp_avg_sq", &ParamState::exp_avg_sq},
    {"max_exp_avg_sq", &ParamState::max_exp_avg_sq},
    {"sum", &ParamState::sum},
    {"master_param", &ParamState::master_param},
    {"exp_avg_absmax", &ParamState::exp_avg_absmax},
    {"exp_avg_sq_absmax", &ParamState::exp_avg_sq_absmax},
};

Tensor ParamState::* state_member(const std::string& name) {
  for (const auto& [entry, member] : kStateEntries) {
    if (name == entry) return member;
  }
  return nullptr;
}

// "state.12.exp_avg" -> ("state", 12, "exp_avg"); false when `key` has another form.
bool split_key(const std::string& key, std::string& section, size_t& index, std::string& field) {
  const size_t first_dot = key.find('.');
  if (first_dot == std::string::npos) return false;
  const size_t second_dot = key.find('.', first_dot + 1);
  if (second_dot == std::string::npos) return false;
  section = key.substr(0, first_dot);
  const char* begin = key.data() + first_dot + 1;
  const char* end = key.data() + second_dot;
  const auto [stop, error] = std::from_chars(begin, end, index);
  if (begin == end || error != std::errc() || stop != end) return false;
  field = key.substr(second_dot + 1);
  return (section == "state" || section == "param_groups") && !field.empty();
}

// The value of a 0-d float64 entry.
double scalar_value(const std::string& source, const std::string& key, const Tensor& tensor) {
  MG_CHECK(tensor.dim() == 0 && tensor.dtype() == DType::Float64, source, ": \"", key,
           "\" should be a 0-d float64 tensor but is ", tensor.sizes(), " ", tensor.dtype(),
           ". Hint: the file was not written by memgrad's optim::save, or was changed since.");
  return tensor.item<double>();
}

// What entry `member` of parameter `index`'s state must be: its shape and dtype, and whether
// it lies in the parameter's layout. An 8-bit Adam's quantised parameter keeps uint8 codes
// in exp_avg and exp_avg_sq and a float32 absmax per block; no other state has absmaxes.
struct ExpectedEntry {
  bool allowed;
  Shape shape;
  DType dtype;
  bool in_param_layout;
};
ExpectedEntry expected_entry(const Optimizer& optimizer, size_t index, const Tensor& param,
                             Tensor ParamState::*member) {
  const auto* eight_bit = dynamic_cast<const Adam8bit*>(&optimizer);
  const int64_t blocks = eight_bit != nullptr ? eight_bit->quantization_blocks(index) : 0;
  if (member == &ParamState::step) return {true, Shape{}, DType::Float32, false};
  if (member == &ParamState::exp_avg_absmax || member == &ParamState::exp_avg_sq_absmax) {
    return {blocks > 0, Shape{blocks}, DType::Float32, false};
  }
  const bool codes = blocks > 0 && (member == &ParamState::exp_avg || member == &ParamState::exp_avg_sq);
  return {true, param.sizes(), codes ? DType::UInt8 : optimizer.state_placement(param).dtype, true};
}

}  // namespace

std::string kind_name(const Optimizer& optimizer) {
  // NOTE: AdamW derives from Adam (AdamW8bit from Adam8bit), so it is asked about first; so
  // are the offloaded ones.
  if (dynamic_cast<const OffloadedAdamW*>(&optimizer)) return "OffloadedAdamW";
  if (dynamic_cast<const OffloadedAdam*>(&optimizer)) return "OffloadedAdam";
  if (dynamic_cast<const AdamW8bit*>(&optimizer)) return "AdamW8bit";
  if (dynamic_cast<const Adam8bit*>(&optimizer)) return "Adam8bit";
  if (dynamic_cast<const AdamW*>(&optimizer)) return "AdamW";
  if (dynamic_cast<const Adam*>(&optimizer)) return "Adam";
  if (dynamic_cast<const SGD*>(&optimizer)) return "SGD";
  if (dynamic_cast<const Adagrad*>(&optimizer)) return "Adagrad";
  return typeid(optimizer).name();
}

OptimizerStateDict state_dict(const Optimizer& optimizer) {
  OptimizerStateDict result{kind_name(optimizer), {}};
  const std::vector<Tensor> params = optimizer.all_params();
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamState* state = optimizer.state(params[i]);
    if (state == nullptr) continue;
    for (const auto& [entry, member] : kStateEntries) {
      const Tensor& tensor = state->*member;
      if (tensor.defined()) result.tensors.emplace_back(detail::str_cat("state.", i, ".", entry), tensor);
    }
  }
  int64_t first_index = 0;
  const std::vector<ParamGroup>& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string prefix = detail::str_cat("param_groups.", g, ".");
    std::vector<int64_t> indices(groups[g].params.size());
    for (int64_t& index : indices) index = first_index++;
    result.tensors.emplace_back(prefix + "params",
                                from_vector(indices, {static_cast<int64_t>(indices.size())},
                                            {.dtype = DType::Int64}));
    result.tensors.emplace_back(prefix + "lr", scalar_tensor(groups[g].lr, {.dtype = DType::Float64}));
    for (const auto& [name, value] : optimizer.hyper_parameters(g)) {
      result.tensors.emplace_back(prefix + name, scalar_tensor(value, {.dtype = DType::Float64}));
    }
  }
  return result;
}

CheckedOptimizerState check_state_dict(const Optimizer& optimizer, const OptimizerStateDict& state,
                                       const std::string& source) {
  const std::string kind = kind_name(optimizer);
  MG_CHECK(state.kind == kind, source, " was written by ", state.kind, " but this is ", kind,
           ". Hint: build the optimizer the checkpoint was saved from.");
  const std::vector<ParamGroup>& groups = optimizer.param_groups();
  const std::vector<Tensor> params = optimizer.all_params();

  // Sort the entries by section; anything unexpected stops the load here.
  std::map<size_t, std::map<std::string, Tensor>> group_entries, param_entries;
  for (const auto& [key, tensor] : state.tensors) {
    std::string section, field;
    size_t index = 0;
    MG_CHECK(split_key(key, section, index, field), source, ": unexpected entry \"", key,
             "\"; an optimizer state dict holds state.<index>.<name> and param_groups.<index>.<name>. Hint: a ",
             "checkpoint written by amp::save (with a GradScaler's scaler.* entries) loads with amp::load.");
    auto& entries = section == "state" ? param_entries : group_entries;
    entries[index][field] = tensor;
  }
  MG_CHECK(group_entries.size() == groups.size() && group_entries.rbegin()->first == groups.size() - 1, source,
           " holds ", group_entries.size(), " parameter groups (the last numbered ",
           group_entries.empty() ? -1 : static_cast<int64_t>(group_entries.rbegin()->first), ") but this ",
           kind, " has ", groups.size(), ". Hint: build the optimizer with the same groups.");

  // Groups: the same parameters, the same hyper-parameters; the saved lr is taken.
  std::vector<double> lrs;
  int64_t first_index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::map<std::string, Tensor>& entries = group_entries[g];
    const std::string where = detail::str_cat("param_groups.", g);
    auto take = [&](const std::string& field) {
      auto found = entries.find(field);
      MG_CHECK(found != entries.end(), source, ": \"", where, ".", field, "\" is missing. Hint: ",
               "the file was not written by optim::save for a ", kind, ".");
      Tensor tensor = found->second;
      entries.erase(found);
      return tensor;
    };
    const Tensor indices = take("params");
    const auto group_size = static_cast<int64_t>(groups[g].params.size());
    MG_CHECK(indices.dim() == 1 && indices.dtype() == DType::Int64, source, ": \"", where,
             ".params\" should be 1-d int64 but is ", indices.sizes(), " ", indices.dtype(), ".");
    MG_CHECK(indices.size(0) == group_size, source, ": parameter group ", g, " holds ", indices.size(0),
             " parameters but this ", kind, "'s group ", g, " holds ", group_size,
             ". Hint: the optimizer must be built over the same model's parameters() as when saved.");
    const std::vector<int64_t> saved = indices.to_vector<int64_t>();
    for (int64_t i = 0; i < group_size; ++i) {
      MG_CHECK(saved[i] == first_index + i, source, ": parameter group ", g, " lists parameter ",
               saved[i], " at position ", i, " where ", first_index + i, " was expected.");
    }
    first_index += group_size;
    lrs.push_back(scalar_value(source, where + ".lr", take("lr")));
    MG_CHECK(lrs.back() >= 0, source, ": parameter group ", g, " was saved with lr = ", lrs.back(),
             "; a learning rate is >= 0.");
    for (const auto& [name, value] : optimizer.hyper_parameters(g)) {
      const double saved_value = scalar_value(source, where + "." + name, take(name));
      MG_CHECK(saved_value == value, source, ": parameter group ", g, " was saved with ", name, " = ",
               saved_value, " but this ", kind, " has ", name, " = ", value,
               ". Hint: build the optimizer with the options it was trained with.");
    }
    MG_CHECK(entries.empty(), source, ": \"", where, ".", entries.begin()->first,
             "\" is not a hyper-parameter of this ", kind, ".");
  }

  // Per-parameter state, checked against its parameter, then copied onto its device.
  std::vector<ParamState> states(params.size());
  MG_CHECK(param_entries.empty() || param_entries.rbegin()->first < params.size(), source,
           " holds state for parameter ", param_entries.empty() ? 0 : param_entries.rbegin()->first,
           " but this ", kind, " has only ", params.size(), " parameters. Hint: the optimizer must be ",
           "built over the same model's parameters() as when saved.");
  for (const auto& [index, entries] : param_entries) {
    const Tensor& param = params[index];
    if (const auto* eight_bit = dynamic_cast<const Adam8bit*>(&optimizer); eight_bit != nullptr) {
      // The fused updates read every entry: a partial state would not step.
      const bool quantized = eight_bit->quantization_blocks(index) > 0;
      for (const char* needed : {"step", "exp_avg", "exp_avg_sq", "exp_avg_absmax", "exp_avg_sq_absmax"}) {
        const bool absmax = std::string(needed).ends_with("absmax");
        MG_CHECK(entries.contains(needed) || (absmax && !quantized), source, ": \"state.", index, ".", needed,
                 "\" is missing; parameter ", index, "'s state has ", entries.size(), " entries. Hint: the file ",
                 "was not written by optim::save for a ", kind, ", or was changed since.");
      }
    }
    for (const auto& [field, saved] : entries) {
      Tensor ParamState::*member = state_member(field);
      const std::string key = detail::str_cat("state.", index, ".", field);
      MG_CHECK(member != nullptr, source, ": unexpected entry \"", key, "\" (no optimizer keeps \"",
               field, "\").");
      const ExpectedEntry expected = expected_entry(optimizer, index, param, member);
      MG_CHECK(expected.allowed, source, ": unexpected entry \"", key, "\": parameter ", index, " (", param.numel(),
               " elements) keeps 32-bit moments in this ", kind, ", which have no absmax. Hint: build the optimizer ",
               "with the block_size and min_8bit_size it was saved with.");
      MG_CHECK(saved.sizes() == expected.shape && saved.dtype() == expected.dtype, source, ": \"", key,
               "\" is ", saved.sizes(), " ", saved.dtype(), " but parameter ", index, " needs ",
               expected.shape, " ", expected.dtype, ". Hint: the checkpoint belongs to another model ",
               "(or to the same model's parameters in another order), or to an optimizer that keeps its state in ",
               "other bits.");
      // In the parameter's layout (channels-last or not), as the fused updates need.
      const Optimizer::StatePlacement placement = optimizer.state_placement(param);
      Tensor copy = empty(expected.shape,
                          {.dtype = expected.dtype,
                           .device = placement.device,
                           .category = MemoryCategory::OptimizerState,
                           .pin_memory = placement.pinned},
                          expected.in_param_layout ? suggest_memory_format(param) : MemoryFormat::Contiguous);
      copy.copy_(saved);
      states[index].*member = copy;
    }
  }
  return {std::move(lrs), std::move(states)};
}

void apply_state_dict(Optimizer& optimizer, CheckedOptimizerState checked) {
  MG_ASSERT(checked.lrs.size() == optimizer.param_groups().size(), "a checked state of ", checked.lrs.size(),
            " groups applied to an optimizer of ", optimizer.param_groups().size());
  // NOTE: through set_group_lr, so that a rate kept on the device for a captured step follows.
  for (size_t g = 0; g < checked.lrs.size(); ++g) optimizer.set_group_lr(g, checked.lrs[g]);
  optimizer.set_states(std::move(checked.states));
}

void load_state_dict(Optimizer& optimizer, const OptimizerStateDict& state, const std::string& source) {
  apply_state_dict(optimizer, check_state_dict(optimizer, state, source));
}

void save(const Optimizer& optimizer, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata) {
  save(state_dict(optimizer), path, metadata);
}

void load(Optimizer& optimizer, const std::string& path) {
  load_state_dict(optimizer, read_state_dict(path), checkpoint_source(path));
}

void save(const OptimizerStateDict& state, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::vector<std::pair<std::string, std::string>> all_metadata = {{"format", "pt"}, {kKindKey, state.kind}};
  all_metadata.insert(all_metadata.end(), metadata.begin(), metadata.end());
  save_safetensors(path, state.tensors, all_metadata);
}

OptimizerStateDict read_state_dict(const std::string& path) {
  OptimizerStateDict state;
  for (const auto& [key, value] : read_safetensors_metadata(path)) {
    if (key == kKindKey) state.kind = value;
  }
  MG_CHECK(!state.kind.empty(), checkpoint_source(path), " names no optimizer in its __metadata__ (\"", kKindKey,
           "\"). Hint: is it a model's file? Optimizer checkpoints are written by optim::save.");
  state.tensors = load_safetensors(path);
  return state;
}

std::string checkpoint_source(const std::string& path) { return "optimizer checkpoint '" + path + "'"; }

}  // namespace mg::optim
