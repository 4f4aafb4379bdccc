// core/multinomial_draw.h — core room: the arithmetic of one multinomial draw, shared by
// the CPU and CUDA kernels so that both draw the same samples from the same Philox state.
//
// With replacement, draw s of row r takes u from Philox block r * num_samples + s and
// picks the first category whose inclusive cumulative weight (summed in double) exceeds
// u * total. Without replacement, category j of row r gets the key log(u) / w_j (the
// log of Efraimidis-Spirakis' u^(1/w), which orders the same) from block r * n + j, and the
// categories with the largest keys are taken, largest first: a draw of k categories
// without replacement, one after another, each in proportion to the remaining weights.
#pragma once

#include <cmath>
#include <cstdint>

#include "memgrad/core/random.h"

namespace mg {

// A uniform double in [0, 1) from the first two words of block `index`.
MG_HOST_DEVICE inline double multinomial_uniform(PhiloxState rng, uint64_t index) {
  auto words = philox_block(rng, index);
  return uniform_double_from_bits(words[0], words[1]);
}

// The without-replacement key of a category of weight `weight` drawn from block `index`.
// NOTE: 1 - u lies in (0, 1], so every positive weight gets a finite key and a zero
// weight's -inf comes after all of them.
MG_HOST_DEVICE inline double multinomial_key(PhiloxState rng, uint64_t index, double weight) {
  if (!(weight > 0.0)) return -INFINITY;
  return log(1.0 - multinomial_uniform(rng, index)) / weight;
}

}  // namespace mg
