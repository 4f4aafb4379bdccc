// autograd/copy.h — copies and conversions: clone (new bytes, gradient flows), detach
// (same bytes, no history), contiguous, and to(dtype) / to(device) (one tensor, or a list).
#pragma once

#include <span>
#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

namespace mg {

Tensor clone(const Tensor& x);
Tensor detach(const Tensor& x);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
// x itself when already dense in `format`, else a copy laid out so (gradient flows back).
Tensor contiguous(const Tensor& x, MemoryFormat format);
Tensor to(const Tensor& x, DType dtype);     // x itself when already of that dtype
Tensor to(const Tensor& x, Device device, bool non_blocking = false);
// to(x, dtype) of each x, each result with its own allocation and gradient node as to()
// gives, in as few kernel launches as the devices allow: the tensors dense in their layout
// that go from float32 to float16 or bfloat16, or back, take one multi-tensor launch per
// device (and per 902 tensors), the others one to() each. For autocast's casts of a
// region's parameters (autograd/autocast_operands.cpp) and their gradients' conversion
// back at backward's end (autograd/accumulate_grad.cpp).
std::vector<Tensor> to_each(std::span<const Tensor> tensors, DType dtype);

}  // namespace mg
