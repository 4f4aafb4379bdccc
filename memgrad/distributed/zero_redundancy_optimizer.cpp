// distributed/zero_redundancy_optimizer.cpp — ZeRO-1's construction (checks, flat layout,
// the shard optimizer) and its step: reduce-scatter, shard step, all-gather.
// Checkpoints: distributed/zero_redundancy_state_dict.cpp.
#include "memgrad/distributed/zero_redundancy_optimizer.h"

#include <cstdint>
#include <string>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/context.h"

namespace mg::distributed {
namespace {

// What the flat layout needs beyond Optimizer::add_group's checks: one device for every
// parameter (a process group's backend carries one kind), one dtype per group (one
// buffer each).
void check_devices_and_dtypes(const std::vector<std::vector<Tensor>>& param_groups) {
  const Tensor& first = param_groups.front().front();
  for (size_t g = 0; g < param_groups.size(); ++g) {
    const Tensor& group_first = param_groups[g].front();
    for (size_t i = 0; i < param_groups[g].size(); ++i) {
      const Tensor& param = param_groups[g][i];
      MG_CHECK(param.device() == first.device(), "ZeroRedundancyOptimizer: parameter ", i, " of group ", g,
               " (", describe_tensor(param), ") is not on the device of the first parameter (",
               describe_tensor(first), "); ZeRO lays the parameters into flat buffers on one device. ",
               "Hint: move the whole model to one device before building the optimizer.");
      MG_CHECK(param.dtype() == group_first.dtype(), "ZeroRedundancyOptimizer: parameter ", i, " of group ", g,
               " (", describe_tensor(param), ") does not have the dtype of the group's first parameter (",
               describe_tensor(group_first), "); each group lies in one flat buffer of one dtype. ",
               "Hint: put the parameters of each dtype in a group of their own.");
    }
  }
}

// What every rank must agree on for the collectives of step() to match: the number of
// groups, of parameters and of elements, and a hash (FNV-1a) of every parameter's group,
// dtype and shape.
std::vector<int64_t> layout_fingerprint(const std::vector<std::vector<Tensor>>& param_groups) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&](uint64_t word) {
    hash ^= word;
    hash *= 1099511628211ull;
  };
  int64_t params = 0;
  int64_t elements = 0;
  for (const std::vector<Tensor>& group : param_groups) {
    mix(group.size());
    for (const Tensor& param : group) {
      mix(static_cast<uint64_t>(param.dtype()));
      mix(static_cast<uint64_t>(param.dim()));
      for (int64_t size : param.sizes()) mix(static_cast<uint64_t>(size));
      elements += param.numel();
    }
    params += static_cast<int64_t>(group.size());
  }
  return {static_cast<int64_t>(param_groups.size()), params, elements, static_cast<int64_t>(hash)};
}

// One all-gather of every rank's fingerprint; every rank sees the same table, so every
// rank throws the same error (rather than some ranks waiting for the timeout in step()).
void check_same_layout_on_every_rank(ProcessGroup& group, const std::vector<std::vector<Tensor>>& param_groups) {
  const Device device = param_groups.front().front().device();
  const std::vector<int64_t> mine = layout_fingerprint(param_groups);
  const auto count = static_cast<int64_t>(mine.size());
  const Tensor gathered = zeros({count * group.size()}, {.dtype = DType::Int64, .device = device});
  group.all_gather(gathered, from_vector(mine, {count}).to(device))->wait();
  // A simulated device (a memory prediction's) carries no values: nothing to compare.
  if (!gathered.storage()->has_data()) return;
  const std::vector<int64_t> all = gathered.to_vector<int64_t>();
  bool same = true;
  for (size_t i = 0; i < all.size(); ++i) same = same && all[i] == all[i % mine.size()];
  if (same) return;
  std::string table;
  for (int rank = 0; rank < group.size(); ++rank) {
    const int64_t* entry = all.data() + rank * count;
    table += detail::str_cat(rank == 0 ? "" : "; ", "rank ", rank, ": ", entry[0], " groups, ", entry[1],
                             " parameters, ", entry[2], " elements, shapes and dtypes hashed to ",
                             static_cast<uint64_t>(entry[3]));
  }
  MG_CHECK(false, "ZeroRedundancyOptimizer: the ranks were given different parameters (", table,
           "). Every rank must build it with the same parameter groups, of the same shapes and dtypes, in the ",
           "same order. Hint: build the same model on every rank, and leave out or freeze the same parameters.");
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::shared_ptr<ProcessGroup> group,
                                                 std::vector<std::vector<Tensor>> param_groups,
                                                 const ShardOptimizerFactory& make_shard_optimizer,
                                                 ZeroOptions options)
    : group_(std::move(group)), options_(options) {
  MG_CHECK(group_ != nullptr, "ZeroRedundancyOptimizer: the process group is null. Hint: pass ",
           "mg::distributed::init_process_group()'s group.");
  MG_CHECK(!param_groups.empty(), "ZeroRedundancyOptimizer got no parameter groups. Hint: pass at least one.");
  // Every group's parameters checked as any optimizer's; the rates come from the shard
  // optimizer below.
  for (const std::vector<Tensor>& params : param_groups) add_group(params, 0.0);
  check_devices_and_dtypes(param_groups);
  check_same_layout_on_every_rank(*group_, param_groups);

  NoGradGuard no_grad;
  std::vector<std::shared_ptr<Work>> broadcasts;
  for (std::vector<Tensor>& params : param_groups) {
    layouts_.emplace_back(std::move(params), group_->rank(), group_->size());
    // Rank 0's parameters, so that ranks seeded differently still train one model.
    broadcasts.push_back(group_->broadcast(layouts_.back().flat_parameters(), 0));
  }
  for (const std::shared_ptr<Work>& broadcast : broadcasts) broadcast->wait();
  for (const FlatParameterShards& layout : layouts_) {
    layout.flat_parameters().bump_version();
    shards_.push_back(layout.shard_of_flat(layout.flat_parameters()));
    shards_.back().requires_grad_();
  }

  shard_optimizer_ = make_shard_optimizer(shards_);
  MG_CHECK(shard_optimizer_ != nullptr, "ZeroRedundancyOptimizer: the shard optimizer factory returned null.");
  const std::vector<optim::ParamGroup>& shard_groups = shard_optimizer_->param_groups();
  MG_CHECK(shard_groups.size() == shards_.size(), "ZeroRedundancyOptimizer: the shard optimizer has ",
           shard_groups.size(), " parameter groups for ", shards_.size(), " groups of parameters. Hint: it must ",
           "hold shards[g] alone as its group g; make_zero_redundancy_optimizer builds it so.");
  for (size_t g = 0; g < shards_.size(); ++g) {
    MG_CHECK(shard_groups[g].params.size() == 1 && shard_groups[g].params[0].is_same(shards_[g]),
             "ZeroRedundancyOptimizer: group ", g, " of the shard optimizer holds ", shard_groups[g].params.size(),
             " parameters, not shards[", g, "] alone. Hint: build it from the shards it is given, one group each.");
    set_group_lr(g, shard_groups[g].lr);
  }
}

void ZeroRedundancyOptimizer::pass_learning_rates() {
  for (size_t g = 0; g < shards_.size(); ++g) {
    const double lr = param_groups()[g].lr;
    if (shard_optimizer_->param_groups()[g].lr != lr) shard_optimizer_->set_group_lr(g, lr);
  }
}

void ZeroRedundancyOptimizer::step() {
  pass_learning_rates();
  NoGradGuard no_grad;
  memory::PhaseScope optimizer_phase(memory::Phase::Optimizer);
  const std::vector<Tensor> gradients = shard_gradients();
  for (size_t g = 0; g < shards_.size(); ++g) shards_[g].set_grad(gradients[g]);
  if (found_inf() != nullptr) {
    shard_optimizer_->step_skipping_if(*found_inf());  // skipped on the device after an fp16 overflow
  } else {
    shard_optimizer_->step();
  }
  // The shard gradients live for the step only.
  for (const Tensor& shard : shards_) shard.set_grad(Tensor());
  all_gather_parameters();
}

std::vector<Tensor> ZeroRedundancyOptimizer::shard_gradients() {
  // Checked for every group before any collective starts: a mistake made on every rank
  // alike (an unused parameter, a model moved) leaves the ranks in step.
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const int64_t moved = layouts_[g].first_moved();
    MG_CHECK(moved < 0, "ZeroRedundancyOptimizer.step(): parameter ", moved, " of group ", g, " (",
             describe_tensor(layouts_[g].params()[moved]), ") no longer views the optimizer's flat buffer: it was ",
             "moved (Module::to, set_data) after the optimizer was built, so its updates would be lost. Hint: move ",
             "the model to its device and dtype first, then build the optimizer.");
    const int64_t missing = layouts_[g].first_without_gradient();
    MG_CHECK(missing < 0, "ZeroRedundancyOptimizer.step(): parameter ", missing, " of group ", g, " (",
             describe_tensor(layouts_[g].params()[missing]), ") has no gradient. ZeRO steps each group as ",
             "flat shards and cannot skip a parameter as plain optimizers do. Hint: leave parameters the loss ",
             "does not use out of the optimizer (or freeze them before building it), or give them zero gradients.");
  }
  std::vector<Tensor> gradients;
  if (options_.gradients_already_reduced) {
    for (const FlatParameterShards& layout : layouts_) {
      std::vector<Tensor> per_parameter;
      for (const Tensor& param : layout.params()) per_parameter.push_back(param.grad());
      gradients.push_back(layout.shard_of(per_parameter, MemoryCategory::Gradient));
    }
    return gradients;
  }
  std::vector<std::shared_ptr<Work>> reductions;
  for (FlatParameterShards& layout : layouts_) {
    const Tensor flat = layout.flat_gradients();
    Tensor shard = empty({layout.shard_numel()},
                         {.dtype = flat.dtype(), .device = flat.device(), .category = MemoryCategory::Gradient});
    reductions.push_back(group_->reduce_scatter(shard, flat, ReduceOp::Average));
    gradients.push_back(std::move(shard));
  }
  for (const std::shared_ptr<Work>& reduction : reductions) reduction->wait();
  return gradients;
}

void ZeroRedundancyOptimizer::all_gather_parameters() {
  std::vector<std::shared_ptr<Work>> gathers;
  for (size_t g = 0; g < layouts_.size(); ++g) {
    // A copy: the shard is part of the all-gather's output, which must not overlap its input.
    const Tensor sent = empty({shards_[g].numel()}, {.dtype = shards_[g].dtype(), .device = shards_[g].device(),
                                                     .category = MemoryCategory::Temporary});
    sent.copy_(shards_[g]);
    gathers.push_back(group_->all_gather(layouts_[g].flat_parameters(), sent));
  }
  for (const std::shared_ptr<Work>& gather : gathers) gather->wait();
  for (const FlatParameterShards& layout : layouts_) layout.flat_parameters().bump_version();
}

std::vector<std::pair<std::string, double>> ZeroRedundancyOptimizer::hyper_parameters(size_t group_index) const {
  return shard_optimizer_->hyper_parameters(group_index);
}

}  // namespace mg::distributed
