// data/permutation.h — the seeded shuffle of dataset indices that the DataLoader and the
// distributed sampler share, so that one seed orders samples the same way in both.
//
// NOTE: a Fisher–Yates pass driven by std::mt19937_64, written out rather than
// std::shuffle (whose algorithm each standard library chooses), so a seed gives the same
// order with every compiler and on every rank.
#pragma once

#include <cstdint>
#include <vector>

namespace mg::data {

// 0, 1, ..., size - 1 in an order fixed by `seed`.
std::vector<int64_t> random_permutation(int64_t size, uint64_t seed);

}  // namespace mg::data
