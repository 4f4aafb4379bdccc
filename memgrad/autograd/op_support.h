// autograd/op_support.h — small helpers every op file uses: argument checks with clear
// messages, and output allocation.
#pragma once

#include <initializer_list>

#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

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

// True when a tensor of `from` sizes broadcasts to exactly `to` (never growing `to`).
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  int leading = to.size() - from.size();
  for (int d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[leading + d]) return false;
  }
  return true;
}

// A new contiguous tensor on `like`'s device.
inline Tensor new_output(const Shape& sizes, DType dtype, const Tensor& like) {
  return empty(sizes, {.dtype = dtype, .device = like.device()});
}

// The layout of an elementwise result of `sizes` (PyTorch's rule, simplified): that of the
// first input that has the result's sizes and is dense in one of the two layouts.
// Broadcast (stride-0) and other strided inputs have no say, so relu's gradient on a
// channels-last activation is channels-last even when the incoming gradient is a
// broadcast view (a mean's backward).
inline MemoryFormat elementwise_format(const Shape& sizes, std::initializer_list<Tensor> inputs) {
  if (sizes.size() != 4) return MemoryFormat::Contiguous;
  for (const Tensor& input : inputs) {
    if (!input.defined() || input.sizes() != sizes) continue;
    if (input.is_contiguous()) return MemoryFormat::Contiguous;
    if (is_contiguous_in(input, MemoryFormat::ChannelsLast)) return MemoryFormat::ChannelsLast;
  }
  return MemoryFormat::Contiguous;
}

// x itself when dense in NCHW or channels-last order (the layouts the batch-norm and
// pooling kernels take), else a contiguous copy.
inline Tensor dense_layout(const Tensor& x) {
  return is_contiguous_in(x, suggest_memory_format(x)) ? x : contiguous_copy(x);
}

// `tensor` dense in `format`: itself, or a copy. A kernel that reads a gradient next to a
// saved tensor indexes both with one layout.
inline Tensor in_format(const Tensor& tensor, MemoryFormat format) {
  return is_contiguous_in(tensor, format) ? tensor : contiguous_copy(tensor, format);
}

// Whether nothing but the caller's handle refers to `tensor`'s buffer, and it spans the
// whole buffer: a backward may then take an incoming gradient as its own, to keep or to
// overwrite, instead of copying it (AccumulateGrad, batch_norm_add_relu's backward).
inline bool sole_owner(const Tensor& tensor) {
  return tensor.impl_ptr().use_count() == 1 && tensor.storage().use_count() == 1 && tensor.storage_offset() == 0 &&
         tensor.storage()->nbytes() == tensor.nbytes();
}

// A new tensor for an elementwise result, laid out as elementwise_format says, so that
// channels-last activations stay channels-last and the kernels run one flat loop.
inline Tensor new_elementwise_output(const Shape& sizes, DType dtype, std::initializer_list<Tensor> inputs) {
  const Tensor& like = *inputs.begin();
  return empty(sizes, {.dtype = dtype, .device = like.device()}, elementwise_format(sizes, inputs));
}

// The gradient of an activation from one fused kernel (BinaryOp::*Backward), which reads
// the incoming gradient and the saved tensor once each.
inline Tensor fused_gradient(BinaryOp op, const Tensor& grad, const Tensor& saved_tensor) {
  MG_ASSERT(grad.sizes() == saved_tensor.sizes() && grad.dtype() == saved_tensor.dtype(),
            "fused gradient: grad ", grad.sizes(), " ", grad.dtype(), " vs saved ", saved_tensor.sizes(), " ",
            saved_tensor.dtype());
  Tensor grad_input = new_elementwise_output(grad.sizes(), grad.dtype(), {grad, saved_tensor});
  kernels(grad.device()).binary(op, grad, saved_tensor, grad_input);
  return grad_input;
}

}  // namespace mg::autograd
