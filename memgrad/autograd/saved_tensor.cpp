// autograd/saved_tensor.cpp — saving, checking and releasing tensors kept for backward,
// plainly or through saved-tensor hooks.
#include "memgrad/autograd/saved_tensor.h"

#include <any>

#include "memgrad/autograd/saved_tensor_hooks.h"

namespace mg::autograd {

// NOTE: the version check under hooks. PyTorch compares the original tensor's version
// counter at unpack time; here the counter lives in the original's Storage, and holding
// the Storage would hold its bytes, which is exactly what hooks such as SaveOnCpu exist to
// give back. So a packed tensor keeps only a weak reference to it:
// - while the original storage is alive (the packed object aliases it, or the user still
//   holds the tensor), an in-place change since saving is caught, as without hooks;
// - once it is gone, the check is skipped. That is safe: nothing can reference those bytes
//   any more, so the packed object cannot alias them, and pack copied them (on the same
//   stream) before any later in-place write; unpack gives back the values at save time.
struct SavedTensor::Packed {
  std::any value;                                    // what the pack hook returned
  std::shared_ptr<const SavedTensorHookPair> hooks;  // whose unpack reads `value`
  std::weak_ptr<Storage> original;                   // for the version check only
  Shape sizes;                                       // what unpack must give back
  DType dtype;
  Device device;
};

namespace {

// The tensor a packed object is, if it is one: its bytes count as ACTIVATION.
const Tensor* packed_tensor(const std::any& value) {
  const Tensor* tensor = std::any_cast<Tensor>(&value);
  return tensor && tensor->defined() ? tensor : nullptr;
}

void check_version(const char* op, uint64_t saved_version, uint64_t version, const Shape& sizes,
                   DType dtype) {
  MG_CHECK(version == saved_version, "a tensor needed for gradient computation was modified by an "
           "in-place operation: ", op, " saved a tensor of shape ", sizes, " (", dtype, ") at version ",
           saved_version, ", and it is now at version ", version, ". Hint: make the in-place change out "
           "of place (e.g. x = x + y instead of x.add_(y)), or .clone() the tensor before modifying it.");
}

// Runs the unpack hook with hooks off, naming the op in whatever it throws.
Tensor call_unpack_hook(const char* op, const SavedTensorHookPair& hooks, const std::any& value) {
  DisableSavedTensorHooks inside_hook;
  try {
    return hooks.unpack(value);
  } catch (const OutOfMemoryError& error) {
    throw OutOfMemoryError(detail::str_cat(op, ": the saved-tensor unpack hook ran out of memory: ",
                                           error.what()));
  } catch (const std::bad_any_cast& error) {
    throw Error(detail::str_cat(op, ": the saved-tensor unpack hook failed: ", error.what(), ". Hint: "
                                "unpack receives exactly what pack returned; std::any_cast it to that type."));
  } catch (const std::exception& error) {
    throw Error(detail::str_cat(op, ": the saved-tensor unpack hook failed: ", error.what()));
  }
}

}  // namespace

SavedTensor::SavedTensor(const Tensor& tensor) : was_saved_(tensor.defined()) {
  if (!tensor.defined()) return;
  Tensor alias = make_view(tensor, tensor.sizes(), tensor.strides(), tensor.storage_offset());
  saved_version_ = tensor.version();
  if (!current_saved_tensor_hooks()) {
    data_ = std::move(alias);
    data_.storage()->add_activation_reference();
    return;
  }
  // A copy, not a reference: entering the hook below pushes onto the stack it lives in.
  std::shared_ptr<const SavedTensorHookPair> hooks = current_saved_tensor_hooks();
  std::any value;
  {
    DisableSavedTensorHooks inside_hook;  // what pack saves is saved plainly
    value = hooks->pack(alias);
  }
  packed_ = std::make_unique<Packed>(
      Packed{std::move(value), std::move(hooks), tensor.storage(), tensor.sizes(), tensor.dtype(), tensor.device()});
  if (const Tensor* packed = packed_tensor(packed_->value)) packed->storage()->add_activation_reference();
}

SavedTensor::~SavedTensor() { release(); }

SavedTensor::SavedTensor(SavedTensor&& other) noexcept
    : data_(std::move(other.data_)),
      packed_(std::move(other.packed_)),
      saved_version_(other.saved_version_),
      was_saved_(other.was_saved_) {}

SavedTensor& SavedTensor::operator=(SavedTensor&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::move(other.data_);
    packed_ = std::move(other.packed_);
    saved_version_ = other.saved_version_;
    was_saved_ = other.was_saved_;
  }
  return *this;
}

void SavedTensor::release() {
  if (data_.defined()) {
    data_.storage()->remove_activation_reference();
    data_ = Tensor();
  }
  if (packed_) {
    if (const Tensor* packed = packed_tensor(packed_->value)) packed->storage()->remove_activation_reference();
    packed_.reset();
  }
}

Tensor SavedTensor::unpack(const char* op) const {
  if (!was_saved_) return Tensor();
  MG_CHECK(data_.defined() || packed_, "trying to backward through the graph a second time: ", op,
           "'s saved tensors were already freed by the first backward(). Hint: pass "
           "retain_graph=true to the first backward() if you need to backward twice, or "
           "recompute the forward.");
  if (!packed_) {
    check_version(op, saved_version_, data_.version(), data_.sizes(), data_.dtype());
    return data_;
  }
  const Packed& packed = *packed_;
  if (std::shared_ptr<Storage> original = packed.original.lock()) {
    check_version(op, saved_version_, original->version(), packed.sizes, packed.dtype);
  }
  Tensor unpacked = call_unpack_hook(op, *packed.hooks, packed.value);
  MG_CHECK(unpacked.defined() && unpacked.sizes() == packed.sizes && unpacked.dtype() == packed.dtype &&
               unpacked.device() == packed.device,
           op, ": the saved-tensor unpack hook must give back the tensor that was saved, of shape ",
           packed.sizes, " (", packed.dtype, ", ", packed.device, "), but it gave ",
           unpacked.defined() ? detail::str_cat("shape ", unpacked.sizes(), " (", unpacked.dtype(), ", ",
                                                unpacked.device(), ")")
                              : std::string("an undefined tensor"),
           ". Hint: convert back what pack changed (e.g. .to(dtype) or .to(device)).");
  return unpacked;
}

}  // namespace mg::autograd
