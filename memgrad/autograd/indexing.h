// autograd/indexing.h — picking elements by index: index_select, gather, and libtorch's
// x.index({...}) (core/tensor_index.h), forward and backward in autograd/indexing.cpp.
#pragma once

#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/core/tensor_index.h"

namespace mg {

// The slices of `input` along `dim` (negative counts from the end) at the positions of
// `index`, a 1-d (or 0-d) int64 or int32 tensor on input's device, in its order,
// repetitions allowed: a result of input's shape with size index.numel() along dim
// (PyTorch's index_select). Every index must lie in [0, input.size(dim)): on the CPU a bad
// one throws here, naming it, its position, the dim and the size; on CUDA the kernel finds
// it without waiting, writes zeros there, and the error is thrown at the next
// synchronisation (cuda/device_error.h).
//
// gather: out[i][j][k] = input[index[i][j][k]][j][k] for dim 0, input[i][index[i][j][k]][k]
// for dim 1, and so on (PyTorch's gather). index (int64 or int32) has input's rank and is
// no larger than input in any dim but `dim`; the result has index's shape. Indices are
// checked as index_select's.
//
// Both save only the index (int64); input's gradient is a scatter-add of the incoming
// gradient into zeros (summed in float32 for 16-bit inputs, converted once), deterministic
// on the CPU.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);

// libtorch's x.index({...}) (core/tensor_index.h for the spelling): each entry indexes the
// next dimension of x. An integer selects (the dim goes; negative counts from the end),
// Slice(start, stop, step) slices with Python's rules (missing or negative bounds, bounds
// clamped to the size; step > 0), None inserts a dim of size 1, Ellipsis stands for as
// many full slices as the other entries leave, and an int64 or int32 tensor picks along
// its dim as index_select does (an n-d index puts its n dims there; one tensor entry at
// most). Integers, slices, None and Ellipsis give a view of x's storage, a tensor entry a
// copy; all are differentiable. Dims after the last entry are kept whole.
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);

}  // namespace mg
