// optim/param_groups.cpp — the weight-decay split: by dimension, then the rule's exceptions,
// with every name the rule gives checked against the model.
#include "memgrad/optim/param_groups.h"

#include <string_view>

#include "memgrad/core/error.h"

namespace mg::optim {

namespace {

// `name` is `pattern`, or ends with "." + pattern.
bool names(std::string_view name, std::string_view pattern) {
  if (name == pattern) return true;
  return name.size() > pattern.size() && name.ends_with(pattern) && name[name.size() - pattern.size() - 1] == '.';
}

}  // namespace

WeightDecaySplit split_by_weight_decay(const nn::NamedTensors& parameters, const WeightDecayRule& rule) {
  std::vector<bool> used(rule.no_decay.size(), false);
  bool found_position_embedding = false;
  WeightDecaySplit split;
  for (const auto& [name, param] : parameters) {
    if (!param.requires_grad()) continue;  // frozen: no optimizer should see it
    bool decay = param.dim() >= 2;
    if (names(name, rule.position_embedding)) {
      found_position_embedding = true;
      decay = decay && rule.decay_position_embedding;
    }
    for (size_t i = 0; i < rule.no_decay.size(); ++i) {
      if (names(name, rule.no_decay[i])) {
        used[i] = true;
        decay = false;
      }
    }
    (decay ? split.decay : split.no_decay).emplace_back(name, param);
  }
  MG_CHECK(!split.decay.empty() || !split.no_decay.empty(), "weight_decay_groups: the model has no trainable ",
           "parameters (", parameters.size(), " parameters, none requiring grad). Hint: build the model first, ",
           "and check that not every parameter is frozen.");
  for (size_t i = 0; i < rule.no_decay.size(); ++i) {
    MG_CHECK(used[i], "weight_decay_groups: no_decay names \"", rule.no_decay[i], "\", but no trainable ",
             "parameter has that name or ends with \".", rule.no_decay[i], "\" (the first is \"",
             parameters.empty() ? std::string() : parameters.front().first,
             "\"). Hint: use the names of model.named_parameters().");
  }
  MG_CHECK(rule.decay_position_embedding || found_position_embedding, "weight_decay_groups: ",
           "decay_position_embedding is false, but no trainable parameter is named \"", rule.position_embedding,
           "\" (or ends with \".", rule.position_embedding, "\"). Hint: set position_embedding to the ",
           "positional table's name in model.named_parameters().");
  return split;
}

std::vector<Tensor> tensors_of(const nn::NamedTensors& named) {
  std::vector<Tensor> tensors;
  tensors.reserve(named.size());
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  return tensors;
}

}  // namespace mg::optim
