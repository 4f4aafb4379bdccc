// data/permutation.cpp — the seeded Fisher–Yates shuffle of data/permutation.h.
#include "memgrad/data/permutation.h"

#include <numeric>
#include <random>
#include <utility>

namespace mg::data {

std::vector<int64_t> random_permutation(int64_t size, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 engine(seed);
  for (int64_t i = size - 1; i > 0; --i) {
    // NOTE: the modulo's bias is below 2^-40 for any dataset that fits in memory.
    const auto j = static_cast<int64_t>(engine() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace mg::data
