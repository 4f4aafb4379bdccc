// core/memory_order.h — the order in which an elementwise loop should walk its dims so
// that it walks memory in order: used by the CPU (core/cpu/strided_loop.h) and CUDA
// (cuda/kernels/strided_indexer.cuh) elementwise loops before they merge dims.
//
// Without it, operands that are all channels-last (strides (HWC, 1, WC, C)) would be walked
// in NCHW order, C-strided, and no two dims would merge; in memory order (N, H, W, C) they
// merge into one flat run, so the flat (vectorised) path runs. Only loops whose result does
// not depend on the visiting order may be reordered (elementwise maps and fills, not
// random fills or ordered scans).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "memgrad/core/shape.h"

namespace mg {

// A permutation of `sizes`' dims, outermost first: dim a goes inside dim b when the first
// operand (in the given order) that moves along both has the smaller stride along a.
// Broadcast dims (stride 0) give no say; undecided pairs keep their order, so row-major
// operands keep row-major order.
template <size_t N>
Shape memory_order(const Shape& sizes, const std::array<Shape, N>& strides) {
  Shape order;
  for (int d = 0; d < sizes.size(); ++d) order.push_back(d);
  auto goes_inside = [&](int64_t a, int64_t b) {
    for (size_t k = 0; k < N; ++k) {
      int64_t stride_a = strides[k][a], stride_b = strides[k][b];
      if (stride_a == 0 || stride_b == 0 || stride_a == stride_b) continue;
      return stride_a < stride_b;
    }
    return false;
  };
  // Insertion sort from the innermost dim outwards: stable, and ranks are at most 8.
  for (int i = sizes.size() - 2; i >= 0; --i) {
    for (int j = i; j + 1 < sizes.size() && goes_inside(order[j], order[j + 1]); ++j) {
      std::swap(order[j], order[j + 1]);
    }
  }
  return order;
}

// `values` (one per dim) rearranged by `order`.
inline Shape permuted(const Shape& values, const Shape& order) {
  Shape result;
  for (int d = 0; d < order.size(); ++d) result.push_back(values[static_cast<int>(order[d])]);
  return result;
}

}  // namespace mg
