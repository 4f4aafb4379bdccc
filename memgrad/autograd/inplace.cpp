// autograd/inplace.cpp — the in-place Tensor methods (add_, sub_, mul_, div_, zero_, fill_,
// copy_): they write into self through the kernels (self may be any strided view) and
// bump its version, so a tensor saved for backward that changes afterwards is caught.
// They have no header here: core/tensor.h declares them with the rest of Tensor, and they
// are defined in autograd/ because they consult grad mode, a room above core.
//
// NOTE: they are not differentiable. Their users — optimizers, gradient accumulation,
// initialisation — run under NoGradGuard; under grad mode, touching a tensor that takes
// part in autograd is an error rather than a silently wrong gradient.
#include <cmath>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

using autograd::broadcasts_to;

void check_not_recording(const char* op, const Tensor& self, const Tensor& other = {}) {
  if (!GradMode::is_enabled()) return;
  MG_CHECK(!(self.requires_grad() && self.is_leaf()), "a leaf tensor that requires grad is used in an in-place "
           "operation (", op, ") on shape ", self.sizes(), "; hint: wrap in mg::NoGradGuard (e.g. in an optimizer) "
           "or use the out-of-place op");
  bool other_requires_grad = other.defined() && other.requires_grad();
  MG_CHECK(!self.requires_grad() && !other_requires_grad, "in-place operations are not differentiable in "
           "memgrad: ", op, " on a tensor of shape ", self.sizes(), " with ",
           self.requires_grad() ? "self" : "the other operand", " requiring grad. Hint: use the out-of-place op "
           "(e.g. x = x + y instead of x.add_(y)), or wrap it in mg::NoGradGuard if no gradient should flow.");
}

// `other` ready to be read by a kernel writing into self: checked to broadcast to self's
// shape, on self's device, in self's dtype, and not overlapping self's bytes in a way
// that would let the kernel read what it has already written.
Tensor operand_for(const char* op, const Tensor& self, const Tensor& other) {
  autograd::check_defined(op, self);
  autograd::check_defined(op, other);
  autograd::check_same_device(op, self, other);
  MG_CHECK(broadcasts_to(other.sizes(), self.sizes()), op, ": the other operand of shape ", other.sizes(),
           " cannot be broadcast to self's shape ", self.sizes(), ". Hint: an in-place op cannot change self's "
           "shape; use the out-of-place op.");
  MG_CHECK(is_floating(self.dtype()) || !is_floating(other.dtype()), op, ": cannot write the ", other.dtype(),
           " result into a ", self.dtype(), " tensor of shape ", self.sizes(),
           ". Hint: convert self with .to(mg::DType::Float32) and use the out-of-place op.");
  if (other.dtype() != self.dtype()) return converted_copy(other, self.dtype(), self.device());
  bool aliases = other.storage() == self.storage() &&
                 !(other.sizes() == self.sizes() && other.strides() == self.strides() &&
                   other.storage_offset() == self.storage_offset());
  return aliases ? contiguous_copy(other) : other;
}

const Tensor& binary_in_place(const char* op, BinaryOp kind, const Tensor& self, const Tensor& other) {
  check_not_recording(op, self, other);
  Tensor operand = operand_for(op, self, other);
  kernels(self.device()).binary(kind, self, operand, self);
  self.bump_version();
  return self;
}

const Tensor& scalar_in_place(const char* op, BinaryOp kind, const Tensor& self, double value) {
  autograd::check_defined(op, self);
  check_not_recording(op, self);
  MG_CHECK(is_floating(self.dtype()) || value == std::trunc(value), op, "(", value, "): a fractional value cannot "
           "be written into a ", self.dtype(), " tensor of shape ", self.sizes(),
           ". Hint: convert with .to(mg::DType::Float32) and use the out-of-place op.");
  kernels(self.device()).binary_scalar(kind, self, value, self);
  self.bump_version();
  return self;
}

// Integer tensors cannot hold a true quotient.
void check_divisible_in_place(const char* op, const Tensor& self) {
  autograd::check_defined(op, self);
  MG_CHECK(is_floating(self.dtype()), op, ": true division of a ", self.dtype(), " tensor of shape ", self.sizes(),
           " gives float32, which cannot be written in place. Hint: use the out-of-place x / y.");
}

const Tensor& fill_in_place(const char* op, const Tensor& self, double value) {
  autograd::check_defined(op, self);
  check_not_recording(op, self);
  kernels(self.device()).fill(self, value);
  self.bump_version();
  return self;
}

// `source` viewed at `sizes` (stride 0 where it broadcasts), for kernels that need equal sizes.
Tensor expanded_view(const Tensor& source, const Shape& sizes) {
  if (source.sizes() == sizes) return source;
  Shape strides = Shape::filled(sizes.size(), 0);
  int leading = sizes.size() - source.dim();
  for (int d = 0; d < source.dim(); ++d) {
    if (source.sizes()[d] != 1) strides[leading + d] = source.strides()[d];
  }
  return make_view(source, sizes, strides, source.storage_offset());
}

}  // namespace

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  if (alpha == 1.0) return binary_in_place("add_", BinaryOp::Add, *this, other);
  check_not_recording("add_", *this, other);
  Tensor operand = operand_for("add_", *this, other);
  // other * alpha goes to a temporary the size of `other` (not of self), then one add.
  Tensor scaled = empty_like(operand);
  kernels(device()).binary_scalar(BinaryOp::Mul, operand, alpha, scaled);
  kernels(device()).binary(BinaryOp::Add, *this, scaled, *this);
  bump_version();
  return *this;
}

const Tensor& Tensor::add_(double value) const { return scalar_in_place("add_", BinaryOp::Add, *this, value); }
const Tensor& Tensor::sub_(const Tensor& other) const { return binary_in_place("sub_", BinaryOp::Sub, *this, other); }
const Tensor& Tensor::mul_(const Tensor& other) const { return binary_in_place("mul_", BinaryOp::Mul, *this, other); }
const Tensor& Tensor::mul_(double value) const { return scalar_in_place("mul_", BinaryOp::Mul, *this, value); }

const Tensor& Tensor::div_(const Tensor& other) const {
  check_divisible_in_place("div_", *this);
  return binary_in_place("div_", BinaryOp::Div, *this, other);
}

const Tensor& Tensor::div_(double value) const {
  check_divisible_in_place("div_", *this);
  return scalar_in_place("div_", BinaryOp::Div, *this, value);
}

const Tensor& Tensor::zero_() const { return fill_in_place("zero_", *this, 0.0); }
const Tensor& Tensor::fill_(double value) const { return fill_in_place("fill_", *this, value); }

const Tensor& Tensor::copy_(const Tensor& source) const {
  autograd::check_defined("copy_", *this);
  autograd::check_defined("copy_", source);
  check_not_recording("copy_", *this, source);
  MG_CHECK(broadcasts_to(source.sizes(), sizes()), "copy_: the source of shape ", source.sizes(),
           " cannot be broadcast to the destination's shape ", sizes());
  if (source.device() == device()) {
    // The copy kernel converts dtypes; a source sharing self's bytes is read from a copy.
    bool aliases = source.storage() == storage() && !source.is_same(*this);
    kernels(device()).copy(expanded_view(aliases ? contiguous_copy(source) : source, sizes()), *this);
  } else {
    // Across devices only contiguous bytes of one dtype move: convert on the source's
    // device, transfer, then scatter into self's strides if self is a strided view.
    Tensor staged_source = converted_copy(expanded_view(source, sizes()), dtype(), source.device());
    Tensor destination = is_contiguous() ? *this : empty_like(*this);
    copy_across_devices(staged_source, destination);
    if (!destination.is_same(*this)) kernels(device()).copy(destination, *this);
  }
  bump_version();
  return *this;
}

}  // namespace mg
