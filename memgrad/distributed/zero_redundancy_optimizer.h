// distributed/zero_redundancy_optimizer.h — ZeRO stage 1: data-parallel training where
// each rank keeps the optimizer state of only its 1/N of the parameters.
//
//   auto group = mg::distributed::init_process_group();             // mpirun -np N
//   auto optimizer = mg::distributed::make_zero_redundancy_optimizer<mg::optim::AdamW>(
//       group, mg::optim::weight_decay_groups(*model, mg::optim::AdamWOptions{.lr = 6e-4}));
//   loss.backward();                 // this rank's batch
//   optimizer->step();               // the same update as AdamW on the averaged gradient
//
// Layout (distributed/flat_parameter_shards.h): each parameter group lies in one flat
// buffer, padded with zeros to a multiple of N; the parameters become views of it (same
// tensors: modules and graphs keep them). Rank r owns elements [r, r + 1) * padded / N of
// each group and keeps an ordinary optimizer (SGD, Adam, AdamW, Adagrad, ...: built by a
// factory, one group per parameter group) whose only parameter per group is a leaf
// viewing that shard of the buffer. step():
//   1. the gradients become views of one flat buffer per group (copied in once; where
//      they already view it, as after zero_grad(false), nothing is copied), and are
//      reduce-scattered with ReduceOp::Average: each rank gets its shard's averaged gradient;
//   2. the shard optimizer steps the shard (its state: shard-sized, OPTIMIZER_STATE);
//   3. every rank's shard is all-gathered back into the flat buffer: the parameters are
//      identical on every rank.
// With ZeroOptions::gradients_already_reduced (the gradients were averaged already, e.g. by
// DistributedDataParallel), step 1 only copies this rank's shard of each gradient and
// leaves the gradients as they are (they may be views of DDP's buckets).
//
// Memory per rank, for a model of P elements in one group (Adam, float32, N ranks):
//   PARAMETER        ceil(P / N) * N elements (the flat buffer: at most N - 1 of padding)
//   GRADIENT         the same, as a flat buffer (with gradients_already_reduced: the
//                    gradients' own bytes); during step() one shard more (its gradient)
//   OPTIMIZER_STATE  2 * ceil(P / N) elements + one 4-byte step counter per group,
//                    where plain Adam keeps 2 * P elements + 4 bytes per parameter tensor
//   TEMPORARY        during step() one shard (what the all-gather sends)
//
// Learning rates: the groups here mirror the parameter groups (lr included), so
// set_lr/set_group_lr and every scheduler work on this optimizer; step() hands each
// group's rate to the shard optimizer before stepping it.
//
// Every rank must build it with the same groups of the same shapes and dtypes: the
// constructor checks (one all-gather of a layout fingerprint) and throws the same
// mg::Error on every rank when they differ, instead of letting mismatched collectives
// wait for the timeout. Parameters start as rank 0's (broadcast at construction).
//
// Limits: every parameter must have a gradient at step() (the flat shards cannot skip one
// as a plain optimizer does); one that misses its gradient on some ranks only makes those
// ranks throw and the others end with the group's timeout error. step_skipping_if (AMP)
// hands the flag to the shard optimizer, whose fused kernels skip on the device (no host
// read); every rank must see the same flag: it does after DDP, whose averaged gradients
// are the same on every rank, but not when ZeRO reduces local gradients itself
// (all-reduce the flag with Sum first). Not capturable as a CUDA graph.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/distributed/flat_parameter_shards.h"
#include "memgrad/distributed/process_group.h"
#include "memgrad/optim/optimizer.h"
#include "memgrad/optim/state_dict.h"

namespace mg::distributed {

struct ZeroOptions {
  // True when the gradients are already averaged over ranks when step() runs (by
  // DistributedDataParallel, or the caller's own all-reduce): step() then reads this
  // rank's shard of each gradient and reduces nothing. Not detected: an all-reduced
  // gradient looks like any other.
  bool gradients_already_reduced = false;
};

class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  // Builds the optimizer that steps this rank's shards: shards[g] is group g's shard, a
  // leaf; the optimizer must hold one group per shard, in order, each with that shard
  // alone, and the group's options (lr included).
  using ShardOptimizerFactory =
      std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>& shards)>;

  // `param_groups`: the parameters of each group, in order (all on one device; each
  // group of one dtype). make_zero_redundancy_optimizer below builds the factory.
  ZeroRedundancyOptimizer(std::shared_ptr<ProcessGroup> group, std::vector<std::vector<Tensor>> param_groups,
                          const ShardOptimizerFactory& make_shard_optimizer, ZeroOptions options = {});

  void step() override;
  // The shard optimizer's.
  std::vector<std::pair<std::string, double>> hyper_parameters(size_t group_index) const override;

  // NOTE: the state lives in the shard optimizer, keyed by the shards; Optimizer::state()
  // and state_bytes() of this object see none. This rank's state bytes:
  // shard_optimizer().state_bytes().
  const optim::Optimizer& shard_optimizer() const { return *shard_optimizer_; }
  const FlatParameterShards& layout(size_t group_index) const { return layouts_.at(group_index); }
  const ProcessGroup& process_group() const { return *group_; }

  // ---- checkpoints: the layout of a plain optimizer's state dict (optim/state_dict.h) ----
  // NOTE: optim::state_dict(*this) and optim::save(*this, path) would see no state (it is
  // the shard optimizer's): save *consolidate_state_dict() with optim::save(state, path).
  // The whole state, as optim::state_dict() of the same optimizer without ZeRO would give
  // it (state.<i>.<entry> per parameter, the groups' hyper-parameters), on rank `to`;
  // std::nullopt on the other ranks. A collective: every rank calls it. Each state entry
  // of each group is all-gathered (PyTorch gathers to one rank; this process group has no
  // gather), so every rank holds one group's entry whole for a moment.
  std::optional<optim::OptimizerStateDict> consolidate_state_dict(int to = 0);
  // Takes this rank's shard of `state`, a whole state dict (consolidate_state_dict's, or a
  // plain optimizer's of the same kind, groups and parameters, or optim::read_state_dict's),
  // which every rank passes; no collective, so a checkpoint loads with any number of
  // ranks. Within a group every parameter must have the same entries and step count (ZeRO
  // keeps one counter per group).
  void load_state_dict(const optim::OptimizerStateDict& state,
                       const std::string& source = "the optimizer state dict");

 protected:
  // step_skipping_if's flag goes to the shard optimizer's step_skipping_if (see above).
  bool skips_on_device() const override { return true; }

 private:
  // Each rank's shard gradient of every group, averaged over ranks (or read as it is).
  std::vector<Tensor> shard_gradients();
  // Copies each rank's stepped shard into every rank's flat parameters.
  void all_gather_parameters();
  // Gives the shard optimizer each group's rate (set_lr() and schedulers change it here).
  void pass_learning_rates();

  std::shared_ptr<ProcessGroup> group_;
  ZeroOptions options_;
  std::vector<FlatParameterShards> layouts_;  // one per group
  std::vector<Tensor> shards_;                // one leaf per group: this rank's shard
  std::unique_ptr<optim::Optimizer> shard_optimizer_;
};

// ZeroRedundancyOptimizer stepping its shards with ShardOptimizer (optim::SGD, Adam, AdamW,
// Adagrad: any optimizer built from (params, options) with add_param_group(params,
// options)), each group with its own options:
//   make_zero_redundancy_optimizer<optim::AdamW>(group, optim::weight_decay_groups(*model, options))
template <class ShardOptimizer, class Options>
std::unique_ptr<ZeroRedundancyOptimizer> make_zero_redundancy_optimizer(
    std::shared_ptr<ProcessGroup> group, std::vector<optim::ParamGroupOptions<Options>> groups,
    ZeroOptions zero_options = {}) {
  std::vector<std::vector<Tensor>> params;
  std::vector<Options> options;
  for (optim::ParamGroupOptions<Options>& each : groups) {
    params.push_back(std::move(each.params));
    options.push_back(each.options);
  }
  auto make_shard_optimizer = [options](const std::vector<Tensor>& shards) {
    auto optimizer = std::make_unique<ShardOptimizer>(std::vector<Tensor>{shards[0]}, options[0]);
    for (size_t g = 1; g < shards.size(); ++g) optimizer->add_param_group({shards[g]}, options[g]);
    return std::unique_ptr<optim::Optimizer>(std::move(optimizer));
  };
  return std::make_unique<ZeroRedundancyOptimizer>(std::move(group), std::move(params), make_shard_optimizer,
                                                   zero_options);
}

// One group: make_zero_redundancy_optimizer<optim::Adam>(group, model->parameters(),
//                                                       optim::AdamOptions{.lr = 1e-3}).
template <class ShardOptimizer, class Options>
std::unique_ptr<ZeroRedundancyOptimizer> make_zero_redundancy_optimizer(std::shared_ptr<ProcessGroup> group,
                                                                        std::vector<Tensor> params,
                                                                        Options options,
                                                                        ZeroOptions zero_options = {}) {
  std::vector<optim::ParamGroupOptions<Options>> groups;
  groups.push_back({std::move(params), options});
  return make_zero_redundancy_optimizer<ShardOptimizer>(std::move(group), std::move(groups), zero_options);
}

}  // namespace mg::distributed
