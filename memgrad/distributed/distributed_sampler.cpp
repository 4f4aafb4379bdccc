// distributed/distributed_sampler.cpp — each rank's shard of a dataset, per epoch
// (PyTorch's DistributedSampler.__iter__, index for index).
#include "memgrad/distributed/distributed_sampler.h"

#include <numeric>

#include "memgrad/core/error.h"
#include "memgrad/data/permutation.h"

namespace mg::distributed {

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  MG_CHECK(options_.num_replicas > 0, "DistributedSampler: num_replicas must be positive, got ",
           options_.num_replicas, ".");
  MG_CHECK(options_.rank >= 0 && options_.rank < options_.num_replicas, "DistributedSampler: rank ",
           options_.rank, " is not one of the ", options_.num_replicas, " replicas (0 .. ",
           options_.num_replicas - 1, ").");
  MG_CHECK(dataset_size_ > 0, "DistributedSampler: the dataset is empty (", dataset_size_,
           " samples).");
  MG_CHECK(!options_.drop_last || dataset_size_ >= options_.num_replicas,
           "DistributedSampler: drop_last with ", dataset_size_, " samples for ",
           options_.num_replicas, " replicas would leave every rank without a sample. Hint: "
           "leave drop_last false (the shards are then padded) or use fewer ranks.");
  // Padding rounds the per-rank count up, cutting rounds it down.
  num_samples_ = options_.drop_last
                     ? dataset_size_ / options_.num_replicas
                     : (dataset_size_ + options_.num_replicas - 1) / options_.num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = data::random_permutation(dataset_size_, options_.seed + static_cast<uint64_t>(epoch));
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Pad by repeating the list from its start (more than once when it is shorter than the
  // padding), or cut its tail: total_size() indices either way.
  const int64_t total = total_size();
  for (int64_t i = 0; static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i]);
  order.resize(total);

  std::vector<int64_t> shard;
  shard.reserve(num_samples_);
  for (int64_t i = options_.rank; i < total; i += options_.num_replicas) shard.push_back(order[i]);
  return shard;
}

}  // namespace mg::distributed
