// distributed/zero_redundancy_state_dict.cpp — ZeRO-1's checkpoints in a plain optimizer's
// layout: the shards' state gathered into one state dict per parameter, and a whole state
// dict cut back into this rank's shards. The shard optimizer's own state dict
// (optim::state_dict: "state.<g>.<entry>" for group g's shard) is the go-between.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"

namespace mg::distributed {
namespace {

// The one counter a ParamState holds (optim/state_dict.h): a 0-d entry, where every other
// entry has its parameter's shape.
constexpr const char* kStepEntry = "step";

using Entries = std::map<std::string, Tensor>;

// The entries of `entries` whose names start with `prefix`, by the rest of their names.
Entries with_prefix(const Entries& entries, const std::string& prefix) {
  Entries found;
  for (auto it = entries.lower_bound(prefix); it != entries.end() && it->first.starts_with(prefix); ++it) {
    found.emplace(it->first.substr(prefix.size()), it->second);
  }
  return found;
}

std::string state_prefix(int64_t index) { return detail::str_cat("state.", index, "."); }
std::string group_prefix(size_t group_index) { return detail::str_cat("param_groups.", group_index, "."); }

}  // namespace

std::optional<optim::OptimizerStateDict> ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  MG_CHECK(to >= 0 && to < group_->size(), "consolidate_state_dict: rank ", to, " is not in this group of ",
           group_->size(), " ranks (0 .. ", group_->size() - 1, ").");
  NoGradGuard no_grad;
  pass_learning_rates();  // the rates as set since the last step
  const optim::OptimizerStateDict shard_state = optim::state_dict(*shard_optimizer_);
  const Entries shard_entries(shard_state.tensors.begin(), shard_state.tensors.end());
  const bool keeps = group_->rank() == to;
  optim::OptimizerStateDict whole{shard_state.kind, {}};
  int64_t first_index = 0;  // of the group's first parameter among all groups'
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const FlatParameterShards& layout = layouts_[g];
    const auto count = static_cast<int64_t>(layout.params().size());
    // NOTE: the same entries in the same (name) order on every rank: every rank's shard
    // optimizer has stepped alike, so the all-gathers below match.
    for (const auto& [entry, shard] : with_prefix(shard_entries, state_prefix(static_cast<int64_t>(g)))) {
      std::vector<Tensor> per_parameter;
      if (entry == kStepEntry) {
        // One counter per group here; a plain optimizer keeps one per parameter.
        if (keeps) {
          for (int64_t i = 0; i < count; ++i) per_parameter.push_back(contiguous_copy(shard));
        }
      } else {
        const Tensor gathered = empty({layout.padded_numel()}, {.dtype = shard.dtype(), .device = shard.device(),
                                                                .category = MemoryCategory::OptimizerState});
        group_->all_gather(gathered, shard)->wait();
        if (keeps) per_parameter = layout.unflatten(gathered);
      }
      for (size_t i = 0; i < per_parameter.size(); ++i) {
        whole.tensors.emplace_back(state_prefix(first_index + static_cast<int64_t>(i)) + entry, per_parameter[i]);
      }
    }
    for (const auto& [field, value] : with_prefix(shard_entries, group_prefix(g))) {
      Tensor kept = value;
      if (field == "params") kept = arange(first_index, first_index + count, 1, {.dtype = DType::Int64});
      whole.tensors.emplace_back(group_prefix(g) + field, kept);
    }
    first_index += count;
  }
  if (!keeps) return std::nullopt;
  return whole;
}

void ZeroRedundancyOptimizer::load_state_dict(const optim::OptimizerStateDict& state, const std::string& source) {
  NoGradGuard no_grad;
  const Entries entries(state.tensors.begin(), state.tensors.end());
  std::set<std::string> used;
  optim::OptimizerStateDict shard_state{state.kind, {}};
  int64_t first_index = 0;
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const FlatParameterShards& layout = layouts_[g];
    const auto count = static_cast<int64_t>(layout.params().size());

    // The group: the same parameters (by index); its other fields go to the shard optimizer,
    // whose own load checks them.
    const Entries group_fields = with_prefix(entries, group_prefix(g));
    const auto indices = group_fields.find("params");
    MG_CHECK(indices != group_fields.end(), source, ": \"", group_prefix(g), "params\" is missing, but this ",
             "optimizer has ", layouts_.size(), " parameter groups. Hint: load a state dict of the same groups.");
    const Tensor expected = arange(first_index, first_index + count, 1, {.dtype = DType::Int64});
    MG_CHECK(indices->second.dtype() == DType::Int64 && indices->second.sizes() == expected.sizes() &&
                 indices->second.to_vector<int64_t>() == expected.to_vector<int64_t>(),
             source, ": parameter group ", g, " holds parameters ", indices->second.str(), " but this optimizer's ",
             "group ", g, " has the ", count, " parameters numbered from ", first_index, ". Hint: build the ",
             "optimizer with the same groups as the one that was saved.");
    for (const auto& [field, value] : group_fields) {
      used.insert(group_prefix(g) + field);
      const Tensor kept = field == "params" ? from_vector(std::vector<int64_t>{static_cast<int64_t>(g)}) : value;
      shard_state.tensors.emplace_back(group_prefix(g) + field, kept);
    }

    // The state: every parameter of the group with the first's entries.
    const Entries first_entries = with_prefix(entries, state_prefix(first_index));
    std::vector<Entries> per_parameter_entries;
    for (int64_t i = 0; i < count; ++i) {
      per_parameter_entries.push_back(with_prefix(entries, state_prefix(first_index + i)));
      std::set<std::string> names, first_names;
      for (const auto& [name, tensor] : per_parameter_entries.back()) names.insert(name);
      for (const auto& [name, tensor] : first_entries) first_names.insert(name);
      MG_CHECK(names == first_names, source, ": parameter ", first_index + i, " has ", names.size(),
               " state entries but parameter ", first_index, " of the same group has ", first_names.size(),
               "; ZeRO steps a group's parameters as one shard, so all must have been stepped alike. ",
               "Hint: a plain optimizer that skipped some parameters (no gradient) cannot be resumed with ZeRO.");
      for (const auto& [name, tensor] : per_parameter_entries.back()) used.insert(state_prefix(first_index + i) + name);
    }
    for (const auto& [name, first_tensor] : first_entries) {
      const std::string shard_key = state_prefix(static_cast<int64_t>(g)) + name;
      std::vector<Tensor> parts;
      for (int64_t i = 0; i < count; ++i) parts.push_back(per_parameter_entries[i].at(name));
      if (name == kStepEntry) {
        for (int64_t i = 0; i < count; ++i) {
          MG_CHECK(parts[i].numel() == 1 && parts[i].item<double>() == first_tensor.item<double>(), source,
                   ": parameter ", first_index + i, " was stepped ", parts[i].item<double>(), " times but parameter ",
                   first_index, " of the same group ", first_tensor.item<double>(), " times; ZeRO keeps one step ",
                   "counter per group. Hint: a plain optimizer that skipped some parameters cannot be resumed ",
                   "with ZeRO.");
        }
        shard_state.tensors.emplace_back(shard_key, first_tensor);
        continue;
      }
      for (int64_t i = 0; i < count; ++i) {
        const Tensor& param = layout.params()[i];
        MG_CHECK(parts[i].sizes() == param.sizes(), source, ": \"", state_prefix(first_index + i), name,
                 "\" has shape ", parts[i].sizes(), " but parameter ", first_index + i, " has shape ", param.sizes(),
                 ". Hint: load a state dict saved from the same model.");
      }
      shard_state.tensors.emplace_back(shard_key, layout.shard_of(parts, MemoryCategory::OptimizerState));
    }
    first_index += count;
  }
  for (const auto& [key, tensor] : entries) {
    MG_CHECK(used.count(key) == 1, source, ": unexpected entry \"", key, "\" for this optimizer's ", first_index,
             " parameters in ", layouts_.size(), " groups. Hint: load a state dict saved from the same model ",
             "with the same parameter groups.");
  }
  optim::load_state_dict(*shard_optimizer_, shard_state, source);
  for (size_t g = 0; g < layouts_.size(); ++g) set_group_lr(g, shard_optimizer_->param_groups()[g].lr);
}

}  // namespace mg::distributed
