// autograd/embedding.h — looking rows up in a table: the op behind nn::Embedding.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

// weight (V, D) rows at indices (any shape, int64 or int32, on the weight's device): a
// result of shape indices.sizes() + (D) in the weight's dtype. Every index must lie in
// [0, V): on the CPU a bad one throws here; on CUDA the kernel finds it without waiting,
// writes zeros for its row, and the error is thrown at the next synchronisation
// (cuda/device_error.h).
//
// padding_idx is -1 (no padding row, PyTorch's None) or a row in [0, V), whose gradient
// stays zero (its forward values are read as usual). NOTE: unlike PyTorch, negative values
// do not count from the end (-1 would then mean both "none" and "the last row"); pass
// V + padding_idx instead, anything else is an error.
//
// Saves only the indices; the weight's gradient sums duplicate indices (in order of
// position on the CPU, so the result is deterministic; atomically on CUDA).
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace mg
