// autograd/saved_tensor.cpp — saving, checking and releasing tensors kept for backward.
#include "autograd/saved_tensor.h"

namespace mg::autograd {

SavedTensor::SavedTensor(const Tensor& tensor) : was_saved_(tensor.defined()) {
  if (!tensor.defined()) return;
  data_ = make_view(tensor, tensor.sizes(), tensor.strides(), tensor.storage_offset());
  saved_version_ = tensor.version();
  data_.storage()->add_activation_reference();
}

SavedTensor::SavedTensor(SavedTensor&& other) noexcept
    : data_(std::move(other.data_)), saved_version_(other.saved_version_), was_saved_(other.was_saved_) {
  other.data_ = Tensor();
}

SavedTensor& SavedTensor::operator=(SavedTensor&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::move(other.data_);
    other.data_ = Tensor();
    saved_version_ = other.saved_version_;
    was_saved_ = other.was_saved_;
  }
  return *this;
}

void SavedTensor::release() {
  if (!data_.defined()) return;
  data_.storage()->remove_activation_reference();
  data_ = Tensor();
}

Tensor SavedTensor::unpack(const char* op) const {
  if (!was_saved_) return Tensor();
  MG_CHECK(data_.defined(), "trying to backward through the graph a second time: ", op,
           "'s saved tensors were already freed by the first backward(). Hint: pass "
           "retain_graph=true to the first backward() if you need to backward twice, or "
           "recompute the forward.");
  MG_CHECK(data_.version() == saved_version_, "a tensor needed for gradient computation was "
           "modified by an in-place operation: ", op, " saved a tensor of shape ", data_.sizes(), " (",
           data_.dtype(), ") at version ", saved_version_, ", and it is now at version ",
           data_.version(), ". Hint: make the in-place change out of place (e.g. x = x + y "
           "instead of x.add_(y)), or .clone() the tensor before modifying it.");
  return data_;
}

}  // namespace mg::autograd
