// distributed/distributed_sampler.h — DistributedSampler: which samples of a dataset each
// rank trains on, as PyTorch's torch.utils.data.DistributedSampler chooses them.
//
// Every epoch, all ranks shuffle the whole dataset with the same seed (seed + epoch, the
// permutation of data/permutation.h), then rank r takes every size-th index from position
// r on. The shards are disjoint and together cover the dataset. So that every rank runs
// the same number of steps (a collective per step must be joined by all), the shards have
// equal length: by default the shuffled list is padded with its own first indices up to a
// multiple of the rank count (a few samples then count twice per epoch); with drop_last
// its tail is cut instead (a few samples are left out of the epoch).
//
//   DistributedSampler sampler(train.size(), {.num_replicas = group->size(),
//                                             .rank = group->rank(), .seed = 1});
//   DataLoader loader(train, {.batch_size = 64,
//                             .sampler = [&](int64_t epoch) { return sampler.indices(epoch); }});
//
// or, as with PyTorch, sampler.set_epoch(epoch) before each epoch and sampler.indices().
#pragma once

#include <cstdint>
#include <vector>

namespace mg::distributed {

struct DistributedSamplerOptions {
  int64_t num_replicas = 1;  // the number of ranks (ProcessGroup::size())
  int64_t rank = 0;          // this rank (ProcessGroup::rank())
  bool shuffle = true;
  uint64_t seed = 0;  // the same on every rank
  // Cut the shuffled list to a multiple of num_replicas instead of padding it.
  bool drop_last = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options);

  // This rank's indices for `epoch` (num_samples() of them).
  std::vector<int64_t> indices(int64_t epoch) const;
  // This rank's indices for the epoch set last (0 until set_epoch is called).
  std::vector<int64_t> indices() const { return indices(epoch_); }
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // Indices per rank and per epoch, and over all ranks (num_samples() * num_replicas).
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }

 private:
  int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace mg::distributed
