// cuda/plan/conv_layout.h — the layout a cuDNN convolution (cuda/cudnn/conv.cpp) runs in,
// and which of its tensors need a WORKSPACE tensor in that layout.
//
// A call runs in one layout for all three tensors: channels_last when any of them is
// (PyTorch's rule: a channels_last input or weight makes a channels_last output), NCHW
// otherwise — and NCHW always for float64, for which cuDNN has no NHWC kernels worth the
// name (PyTorch keeps float64 convolutions contiguous too). An operand not dense in that
// layout is copied into a WORKSPACE tensor in it; a result not dense in it is computed
// into one and copied back. Both only happen for mixed layouts.
//
// Host logic only, built in every build, for the convolution and the memory predictor
// (memory/cuda_scratch_model.cpp) alike.
#pragma once

#include "memgrad/core/dtype.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda {

// The layout of the call that reads and writes these (N, C, H, W) tensors.
MemoryFormat conv_call_layout(DType dtype, const Tensor& input, const Tensor& weight, const Tensor& output);

// Whether the call needs a WORKSPACE tensor of `tensor`'s sizes in `layout` in its place.
bool needs_layout_copy(const Tensor& tensor, MemoryFormat layout);

}  // namespace mg::cuda
