// autograd/dropout.h — inverted dropout: zeroes elements with probability p and scales
// the rest by 1/(1-p). It saves a 1-byte-per-element mask (not the input) for backward.
#pragma once

#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"

namespace mg {

// Identity when !training or p == 0. Random numbers come from `generator` (default: the
// process-wide one), so a seed reproduces the mask on any device.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

}  // namespace mg
