// autograd/op_support.h — small helpers every op file uses: argument checks with clear
// messages, and output allocation.
#pragma once

#include "core/factory.h"
#include "core/kernels.h"
#include "core/tensor.h"

namespace mg::autograd {

// Throws naming `op` and both devices unless a and b live on the same device.
inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  MG_CHECK(a.device() == b.device(), op, ": expected both tensors on the same device, got ", a.device(),
           " (shape ", a.sizes(), ") and ", b.device(), " (shape ", b.sizes(),
           "). Hint: move one with .to(device).");
}

inline void check_defined(const char* op, const Tensor& x) {
  MG_CHECK(x.defined(), op, ": got an undefined tensor");
}

inline void check_floating(const char* op, const Tensor& x) {
  MG_CHECK(is_floating(x.dtype()), op, ": expected a floating-point tensor, got ", x.dtype(), " of shape ",
           x.sizes(), ". Hint: convert with .to(mg::DType::Float32).");
}

// A new contiguous tensor on `like`'s device.
inline Tensor new_output(const Shape& sizes, DType dtype, const Tensor& like) {
  return empty(sizes, {.dtype = dtype, .device = like.device()});
}

}  // namespace mg::autograd
