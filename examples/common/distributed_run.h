// examples/common/distributed_run.h — the examples' data-parallel training (--distributed),
// as a PyTorch user runs it with torchrun and DistributedDataParallel:
//
//   mpirun -np 2 build/mnist --distributed ...          # CPU ranks over MPI
//   mpirun -np 2 build/gpt --device cuda ...             # GPU ranks over NCCL (automatic:
//                                                        # a launcher with 2 ranks or more)
//
// A DistributedRun is the run's place in the job: its process group (NCCL for --device
// cuda, each rank on cuda:<local rank>; MPI for the CPU; a world of one in this process when
// no launcher started it), its rank and device, the model wrapped in
// DistributedDataParallel, and what the programs do differently per rank:
// - seeds: initial weights from --seed on every rank (DDP broadcasts rank 0's anyway);
//   streams that must differ per rank (dropout masks, GPT windows, augmentation) keep
//   --seed's on rank 0 and mix the rank in elsewhere (rank_seed), so a run of one rank is
//   the plain run, exactly;
// - data: each rank trains on its DistributedSampler shard of the training set, reshuffled
//   per epoch (the sampler is a closed form of the seed and the epoch); evaluation shards
//   the test samples without padding and sums the counts over ranks, so the accuracy is
//   over each sample exactly once;
// - output: only rank 0 prints (other ranks' standard output goes to /dev/null; their
//   errors still reach stderr) and writes files; a write by rank 0 is followed by a
//   collective that tells every rank whether it succeeded (on_main), so a failed
//   checkpoint ends every rank with an error rather than leaving them to time out.
// A run that is not distributed is a DistributedRun too (rank 0 of 1, no group): the
// programs ask the same questions either way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/data/dataloader.h>
#include <memgrad/distributed/distributed_data_parallel.h>
#include <memgrad/distributed/process_group.h>
#include <memgrad/distributed/zero_redundancy_optimizer.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/state_dict.h>

namespace examples {

// Whether this run trains data-parallel: --distributed was given, or a launcher started
// this process as one of two ranks or more (mpirun's OMPI_COMM_WORLD_SIZE, torchrun-style
// WORLD_SIZE): several processes training on their own would write the same files. Throws
// UsageError for malformed launcher variables (naming the variable).
bool wants_distributed(bool flag);

// Throws UsageError when `given` (a flag that cannot work data-parallel) meets a
// distributed run: "`flag` does not go with --distributed (...): `why`".
void refuse_distributed(bool distributed, bool given, const std::string& flag, const std::string& why);

// The data-parallel checks every example makes after parsing: --zero needs --distributed;
// --cuda-graph cannot go with it (the all-reduce starts from the host); and --world-size
// as check_world_size says.
struct DistributedFlags {
  bool distributed = false;
  bool zero = false;
  bool cuda_graph = false;
  bool predicting = false;
  std::optional<int> world_size;
};
void check_distributed_flags(const DistributedFlags& flags);

// --distributed's and --zero's lines for a usage text (`with_zero`: the program has --zero).
std::string distributed_usage(bool with_zero);

// --world-size N: the ranks of the data-parallel run that --predict-memory/--fit-batch with
// --distributed predict one rank of (1 when not given, as --distributed without a launcher
// is a world of one). Throws UsageError for --world-size without both --distributed and a
// prediction, and for a prediction under a launcher with two ranks or more: a prediction
// runs in one process, without ranks (the hint says how).
// --world-size's value: a count of ranks, 1 .. 2^20 (UsageError otherwise).
int parse_world_size(const std::string& text);
void check_world_size(bool distributed, bool predicting, std::optional<int> world_size);
// --world-size's lines for the usage text's predictions part.
std::string world_size_usage();

// A SplitMix64 mix of (seed, salt): unrelated keys for neighbouring seeds or salts.
uint64_t mix_seed(uint64_t seed, uint64_t salt);

class DistributedRun {
 public:
  // Not distributed: rank 0 of 1 on `device`, no group.
  explicit DistributedRun(mg::Device device) : device_(device) {}
  // Over a group made elsewhere (nullptr: not distributed), on `device`: a per-rank memory
  // prediction's SimulatedProcessGroup (memory_prediction.h), so that the prediction wraps
  // the model, builds the optimizer and shards the data exactly as the run does. Joins
  // nothing and leaves standard output alone.
  DistributedRun(mg::Device device, std::shared_ptr<mg::distributed::ProcessGroup> group)
      : group_(std::move(group)), device_(device) {}
  // Joins the job (when `distributed`): see above. On ranks other than 0, standard output
  // goes to /dev/null from here on.
  static DistributedRun start(bool distributed, mg::Device device);

  bool active() const { return group_ != nullptr; }
  int rank() const { return group_ ? group_->rank() : 0; }
  int size() const { return group_ ? group_->size() : 1; }
  bool is_main() const { return rank() == 0; }
  // Where this rank trains: --device, or this rank's GPU (cuda:<local rank>).
  mg::Device device() const { return device_; }
  const std::shared_ptr<mg::distributed::ProcessGroup>& group() const { return group_; }
  // "2 ranks over mpi", for the programs' set-up line; empty when not distributed.
  std::string describe() const;

  // What trains: `model` wrapped in DistributedDataParallel when distributed (rank 0's
  // weights broadcast to all), else `model` itself. Move the model to device() first.
  std::shared_ptr<mg::nn::Module> wrap(std::shared_ptr<mg::nn::Module> model);
  // The DDP made by wrap(); nullptr when not distributed.
  mg::distributed::DistributedDataParallel* ddp() const { return ddp_.get(); }

  // `seed` on rank 0; mixed with the rank on the others.
  uint64_t rank_seed(uint64_t seed) const;

  // A training loader's options for this rank: when distributed, its DistributedSampler
  // shard in place of `shuffle` (every rank shuffles the whole set with options.seed +
  // epoch, as `shuffle` does, and takes every size()-th sample; shards padded to equal
  // length). Unchanged when not distributed.
  mg::data::DataLoaderOptions training_shard(mg::data::DataLoaderOptions options, int64_t dataset_size) const;
  // An evaluation loader's options: the dataset's first `samples` samples, rank r taking
  // r, r + size(), ... (no padding: each is evaluated once, on one rank).
  mg::data::DataLoaderOptions evaluation_shard(mg::data::DataLoaderOptions options, int64_t samples) const;
  // The samples an epoch covers: the whole set of `dataset_size`, or with --limit about
  // `limit` in whole global batches (batch_size per rank, times size()), as many whatever
  // the number of ranks with the same global batch.
  int64_t limited_samples(int64_t dataset_size, int64_t batch_size, int64_t limit) const;

  // `Opt` over `params` (SGD, Adam, AdamW, Adagrad), or with `zero` ZeRO-1 stepping `Opt`
  // on this rank's shard, the gradients arriving averaged by the run's DDP.
  template <class Opt, class Options>
  std::unique_ptr<mg::optim::Optimizer> make_optimizer(std::vector<mg::Tensor> params, Options options,
                                                       bool zero) const {
    if (!zero) return std::make_unique<Opt>(std::move(params), options);
    return mg::distributed::make_zero_redundancy_optimizer<Opt>(group_, std::move(params), options,
                                                                {.gradients_already_reduced = true});
  }
  // The same with parameter groups (optim::weight_decay_groups).
  template <class Opt, class Options>
  std::unique_ptr<mg::optim::Optimizer> make_optimizer(std::vector<mg::optim::ParamGroupOptions<Options>> groups,
                                                       bool zero) const {
    if (!zero) return std::make_unique<Opt>(std::move(groups));
    return mg::distributed::make_zero_redundancy_optimizer<Opt>(group_, std::move(groups),
                                                                {.gradients_already_reduced = true});
  }

  // Each value summed over ranks (a float64 all-reduce on the group's device); `values`
  // when not distributed.
  std::vector<double> sum(std::vector<double> values) const;

  // Runs `write` on rank 0, then tells every rank whether it succeeded: rank 0 rethrows its
  // error, the others throw an mg::Error saying that rank 0 could not `what`. Every rank
  // calls it; when it returns, rank 0's file is complete.
  void on_main(const std::string& what, const std::function<void()>& write) const;

  // Every rank's peaks on its device, in rank order (a collective; one entry, this
  // process's, when not distributed).
  std::vector<mg::memory::Snapshot> peaks_by_rank() const;

 private:
  std::shared_ptr<mg::distributed::ProcessGroup> group_;
  mg::Device device_;
  std::shared_ptr<mg::distributed::DistributedDataParallel> ddp_;
};

// ---- the optimizer's part of a checkpoint, ZeRO-1 included ----

// The whole optimizer state a checkpoint saves: optim::state_dict(optimizer), or for a
// ZeroRedundancyOptimizer its state consolidated on rank 0 (a collective: every rank calls
// it; ranks other than 0 get std::nullopt).
std::optional<mg::optim::OptimizerStateDict> checkpoint_state(mg::optim::Optimizer& optimizer);
// Loads a whole state dict (what checkpoint_state gave, on any number of ranks): a
// ZeroRedundancyOptimizer keeps its shard, any other optimizer takes it all.
void load_checkpoint_state(mg::optim::Optimizer& optimizer, const mg::optim::OptimizerStateDict& state,
                           const std::string& source);

}  // namespace examples
