// tests/distributed/test_distributed_sampler.cpp — DistributedSampler without MPI: each
// rank's shard is computed from (rank, size) alone, so the ranks of a job are simulated
// by building one sampler per rank. Shards are disjoint and cover the dataset, padded
// (or cut with drop_last) to equal lengths exactly as PyTorch's DistributedSampler does,
// reshuffled per epoch from a seed all ranks share.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/data/permutation.h"
#include "memgrad/distributed/distributed_sampler.h"

using mg::distributed::DistributedSampler;
using mg::distributed::DistributedSamplerOptions;

namespace {

// Every rank's indices for `epoch`, rank by rank.
std::vector<std::vector<int64_t>> shards(int64_t dataset_size, DistributedSamplerOptions options,
                                         int64_t epoch) {
  std::vector<std::vector<int64_t>> result;
  for (int64_t rank = 0; rank < options.num_replicas; ++rank) {
    options.rank = rank;
    result.push_back(DistributedSampler(dataset_size, options).indices(epoch));
  }
  return result;
}

// How often each index occurs over all shards.
std::map<int64_t, int> counts(const std::vector<std::vector<int64_t>>& all) {
  std::map<int64_t, int> result;
  for (const auto& shard : all) {
    for (int64_t index : shard) ++result[index];
  }
  return result;
}

}  // namespace

TEST_CASE("Unshuffled shards are PyTorch's: every size-th index, padded from the start",
          "[distributed][sampler]") {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False)
  const auto all = shards(10, {.num_replicas = 4, .shuffle = false}, 0);
  CHECK(all[0] == std::vector<int64_t>{0, 4, 8});
  CHECK(all[1] == std::vector<int64_t>{1, 5, 9});
  CHECK(all[2] == std::vector<int64_t>{2, 6, 0});
  CHECK(all[3] == std::vector<int64_t>{3, 7, 1});
  // ... and with drop_last=True the tail is cut instead.
  const auto cut = shards(10, {.num_replicas = 4, .shuffle = false, .drop_last = true}, 0);
  CHECK(cut[0] == std::vector<int64_t>{0, 4});
  CHECK(cut[3] == std::vector<int64_t>{3, 7});
  // Fewer samples than ranks: the list repeats as often as needed.
  const auto small = shards(3, {.num_replicas = 8, .shuffle = false}, 0);
  const std::vector<int64_t> expected = {0, 1, 2, 0, 1, 2, 0, 1};
  for (int rank = 0; rank < 8; ++rank) CHECK(small[rank] == std::vector<int64_t>{expected[rank]});
}

TEST_CASE("Shuffled shards are disjoint, equal in length and cover the dataset",
          "[distributed][sampler]") {
  SECTION("the dataset divides evenly: each index exactly once") {
    const auto all = shards(12, {.num_replicas = 4, .seed = 3}, 0);
    for (const auto& shard : all) CHECK(shard.size() == 3);
    const auto seen = counts(all);
    CHECK(seen.size() == 12);
    for (const auto& [index, count] : seen) {
      CHECK(index >= 0);
      CHECK(index < 12);
      CHECK(count == 1);
    }
  }
  SECTION("padding: every index at least once, the first ones of the shuffled list twice") {
    DistributedSampler sampler(10, {.num_replicas = 4, .rank = 0, .seed = 3});
    CHECK(sampler.num_samples() == 3);
    CHECK(sampler.total_size() == 12);
    const auto all = shards(10, {.num_replicas = 4, .seed = 3}, 0);
    for (const auto& shard : all) CHECK(shard.size() == 3);
    const auto seen = counts(all);
    CHECK(seen.size() == 10);
    const std::vector<int64_t> permutation = mg::data::random_permutation(10, 3);
    for (const auto& [index, count] : seen) {
      const bool padded = index == permutation[0] || index == permutation[1];
      CHECK(count == (padded ? 2 : 1));
    }
  }
  SECTION("drop_last: distinct indices, the shuffled list's tail left out") {
    const auto all = shards(10, {.num_replicas = 4, .seed = 3, .drop_last = true}, 0);
    for (const auto& shard : all) CHECK(shard.size() == 2);
    const auto seen = counts(all);
    CHECK(seen.size() == 8);
    const std::vector<int64_t> permutation = mg::data::random_permutation(10, 3);
    CHECK(seen.count(permutation[8]) == 0);
    CHECK(seen.count(permutation[9]) == 0);
  }
}

TEST_CASE("Ranks interleave one permutation of seed + epoch, new each epoch",
          "[distributed][sampler]") {
  const DistributedSamplerOptions options = {.num_replicas = 3, .seed = 11};
  const auto epoch0 = shards(9, options, 0);
  const auto epoch1 = shards(9, options, 1);
  // Rank r holds positions r, r + 3, r + 6 of the permutation every rank computes.
  for (int64_t epoch : {0, 1}) {
    const auto& all = epoch == 0 ? epoch0 : epoch1;
    const std::vector<int64_t> permutation = mg::data::random_permutation(9, 11 + epoch);
    for (int64_t rank = 0; rank < 3; ++rank) {
      for (int64_t i = 0; i < 3; ++i) CHECK(all[rank][i] == permutation[rank + 3 * i]);
    }
  }
  CHECK(epoch0 != epoch1);
  CHECK(shards(9, options, 0) == epoch0);  // reproducible: the same on every rank, every run
  CHECK(shards(9, {.num_replicas = 3, .seed = 12}, 0) != epoch0);

  // set_epoch, as with PyTorch, picks the epoch indices() serves.
  DistributedSampler sampler(9, {.num_replicas = 3, .rank = 1, .seed = 11});
  CHECK(sampler.epoch() == 0);
  CHECK(sampler.indices() == epoch0[1]);
  sampler.set_epoch(1);
  CHECK(sampler.epoch() == 1);
  CHECK(sampler.indices() == epoch1[1]);
}

TEST_CASE("DistributedSampler refuses a rank outside the group and an empty dataset",
          "[distributed][sampler]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(DistributedSampler(10, {.num_replicas = 2, .rank = 2}),
                    Contains("rank 2 is not one of the 2 replicas"));
  CHECK_THROWS_WITH(DistributedSampler(10, {.num_replicas = 0}),
                    Contains("num_replicas must be positive"));
  CHECK_THROWS_WITH(DistributedSampler(0, {}), Contains("the dataset is empty"));
  CHECK_THROWS_WITH(DistributedSampler(3, {.num_replicas = 4, .drop_last = true}),
                    Contains("leave every rank without a sample"));
}
