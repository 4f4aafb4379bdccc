// optim/param_groups.h — which parameters get weight decay: the usual rule for transformers
// (nanoGPT's configure_optimizers), as parameter groups an optimizer takes whole:
//
//   optim::AdamW optimizer(optim::weight_decay_groups(
//       *model, optim::AdamWOptions{.lr = 6e-4, .beta2 = 0.95, .weight_decay = 0.1}));
//
// The rule: a parameter with two or more dimensions (a linear layer's weight, an embedding
// table) is decayed; one with fewer (a bias, a LayerNorm's weight and bias) is not, since
// pulling a gain or an offset towards zero only fights what it is there to learn. Two
// choices are the user's (WeightDecayRule): whether the positional embedding table is
// decayed (nanoGPT decays it, as every matrix; others leave it out), and names never to
// decay whatever their shape.
//
// Parameters that do not require grad (frozen) are left out of every group.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memgrad/nn/module.h"
#include "memgrad/optim/optimizer.h"

namespace mg::optim {

// Names are matched whole or as a dotted suffix: "wpe.weight" names "transformer.wpe.weight"
// (and "wpe.weight"), not "xwpe.weight".
struct WeightDecayRule {
  // The positional embedding table is decayed like any matrix (nanoGPT), or not.
  bool decay_position_embedding = true;
  std::string position_embedding = "wpe.weight";
  // Never decayed, whatever their shape. Each must name a parameter: a typo is an error,
  // not a silently decayed tensor.
  std::vector<std::string> no_decay;
};

// The trainable parameters of `parameters` (a model's named_parameters()) split by `rule`,
// each part in the given order.
struct WeightDecaySplit {
  nn::NamedTensors decay;
  nn::NamedTensors no_decay;
};
WeightDecaySplit split_by_weight_decay(const nn::NamedTensors& parameters, const WeightDecayRule& rule = {});

// The tensors of `named`, in order.
std::vector<Tensor> tensors_of(const nn::NamedTensors& named);

// Two groups with `options`: the decayed parameters with options.weight_decay, then the
// others with weight decay 0. An empty group is left out (optimizers refuse empty groups),
// so a model without 1-d parameters gives one group. Options: any optimizer's options with
// a weight_decay member (AdamWOptions, AdamOptions, SGDOptions, AdagradOptions).
template <class Options>
std::vector<ParamGroupOptions<Options>> weight_decay_groups(const nn::Module& model, const Options& options,
                                                            const WeightDecayRule& rule = {}) {
  WeightDecaySplit split = split_by_weight_decay(model.named_parameters(), rule);
  std::vector<ParamGroupOptions<Options>> groups;
  if (!split.decay.empty()) groups.push_back({tensors_of(split.decay), options});
  if (!split.no_decay.empty()) {
    Options without_decay = options;
    without_decay.weight_decay = 0;
    groups.push_back({tensors_of(split.no_decay), without_decay});
  }
  return groups;
}

}  // namespace mg::optim
