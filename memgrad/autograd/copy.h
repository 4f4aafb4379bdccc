// autograd/copy.h — copies and conversions: clone (new bytes, gradient flows), detach
// (same bytes, no history), contiguous, and to(dtype) / to(device).
#pragma once

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

}  // namespace mg
