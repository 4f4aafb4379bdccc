// cuda/plan/conv_layout.cpp — the layout of a cuDNN convolution (see the header).
#include "memgrad/cuda/plan/conv_layout.h"

namespace mg::cuda {

MemoryFormat conv_call_layout(DType dtype, const Tensor& input, const Tensor& weight, const Tensor& output) {
  if (dtype == DType::Float64) return MemoryFormat::Contiguous;
  for (const Tensor* tensor : {&input, &weight, &output}) {
    if (suggest_memory_format(*tensor) == MemoryFormat::ChannelsLast) return MemoryFormat::ChannelsLast;
  }
  return MemoryFormat::Contiguous;
}

bool needs_layout_copy(const Tensor& tensor, MemoryFormat layout) { return !is_contiguous_in(tensor, layout); }

}  // namespace mg::cuda
