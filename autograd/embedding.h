// autograd/embedding.h — looking rows up in a table: the op behind nn::Embedding.
#pragma once

#include "core/tensor.h"

namespace mg {

// weight (V, D) rows at indices (any shape, int64 or int32): a result of shape
// indices.sizes() + (D). The row of padding_idx (-1: none; negative values count from V)
// gets no gradient. Saves only the indices; the weight's gradient sums duplicate indices
// (in order of position on the CPU, so the result is deterministic).
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace mg
