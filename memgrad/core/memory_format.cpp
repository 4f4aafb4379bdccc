// core/memory_format.cpp — layout strides and checks for Contiguous and ChannelsLast.
#include "memgrad/core/memory_format.h"

#include <algorithm>
#include <array>
#include <ostream>

#include "memgrad/core/error.h"

namespace mg {

namespace {

// Dims from fastest- to slowest-varying in memory.
std::array<int, 4> channels_last_order() { return {1, 3, 2, 0}; }

}  // namespace

std::ostream& operator<<(std::ostream& out, MemoryFormat format) {
  return out << (format == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous");
}

Shape strides_for(const Shape& sizes, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return contiguous_strides(sizes);
  MG_CHECK(sizes.size() == 4, "channels_last needs a 4-D (N, C, H, W) tensor, got shape ", sizes,
           ". Hint: use MemoryFormat::Contiguous for other ranks.");
  Shape strides = sizes;
  int64_t expected = 1;
  for (int dim : channels_last_order()) {
    strides[dim] = expected;
    expected *= std::max<int64_t>(sizes[dim], 1);
  }
  return strides;
}

bool is_contiguous_in(const Tensor& tensor, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return tensor.is_contiguous();
  if (tensor.dim() != 4) return false;
  int64_t expected = 1;
  for (int dim : channels_last_order()) {
    int64_t size = tensor.sizes()[dim];
    if (size == 1) continue;
    if (tensor.strides()[dim] != expected) return false;
    expected *= size;
  }
  return true;
}

MemoryFormat suggest_memory_format(const Tensor& tensor) {
  bool channels_last = !tensor.is_contiguous() && is_contiguous_in(tensor, MemoryFormat::ChannelsLast);
  return channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

}  // namespace mg
