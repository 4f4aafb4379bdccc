// core/memory_format.h — how a 4-D (N, C, H, W) tensor's elements are laid out in memory.
//
// Contiguous is row-major NCHW. ChannelsLast keeps the same logical sizes but stores the
// channels of one pixel next to each other (NHWC in memory): strides (H*W*C, 1, W*C, C).
// Convolutions on tensor cores are fastest in that layout; the sizes a user sees and
// indexes with never change, only the strides do.
#pragma once

#include <iosfwd>

#include "memgrad/core/tensor.h"

namespace mg {

enum class MemoryFormat { Contiguous, ChannelsLast };

std::ostream& operator<<(std::ostream& out, MemoryFormat format);

// Dense strides for `sizes` in `format` (ChannelsLast needs 4-D sizes).
Shape strides_for(const Shape& sizes, MemoryFormat format);

// True when `tensor` is dense in `format`'s order (dims of size 1 may have any stride).
bool is_contiguous_in(const Tensor& tensor, MemoryFormat format);

// The layout a result computed from `tensor` should keep: ChannelsLast for a 4-D tensor
// dense in channels-last order that is not also plain contiguous; Contiguous otherwise.
MemoryFormat suggest_memory_format(const Tensor& tensor);

}  // namespace mg
