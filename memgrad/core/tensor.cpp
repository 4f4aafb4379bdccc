// core/tensor.cpp — tensor metadata, data access and autograd state.
#include "memgrad/core/tensor.h"

#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"

namespace mg {

namespace {

bool compute_is_contiguous(const Shape& sizes, const Shape& strides) {
  if (sizes.numel() == 0) return true;  // no elements, nothing out of order (as in PyTorch)
  int64_t expected = 1;
  for (int i = sizes.size() - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

}  // namespace

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage_in, Shape sizes_in, Shape strides_in,
                       int64_t offset, DType dtype_in)
    : storage(std::move(storage_in)),
      sizes(sizes_in),
      strides(strides_in),
      storage_offset(offset),
      dtype(dtype_in),
      is_contiguous(compute_is_contiguous(sizes_in, strides_in)) {}

TensorImpl::~TensorImpl() = default;

void Tensor::throw_undefined(const char* accessor) {
  throw Error(std::string("Tensor::") + accessor + "() called on an undefined tensor (a default-"
              "constructed mg::Tensor holds no data yet). Hint: assign it the result of an op "
              "before using it, or test .defined() first.");
}

int64_t Tensor::size(int64_t dim) const { return checked("size").sizes[wrap_dim(dim, this->dim())]; }
int64_t Tensor::stride(int64_t dim) const {
  return checked("stride").strides[wrap_dim(dim, this->dim())];
}

void* Tensor::raw_data() const {
  MG_CHECK(checked("raw_data").storage->has_data(), "the tensor on ", device(),
           " has no data: the simulated device only tracks sizes and memory");
  return static_cast<char*>(impl_->storage->data()) +
         impl_->storage_offset * static_cast<int64_t>(element_size());
}

const Tensor& Tensor::set_memory_category(MemoryCategory category) const {
  checked("set_memory_category").storage->set_category(category);
  return *this;
}

Tensor Tensor::pin_memory() const {
  if (is_pinned()) return *this;
  MG_CHECK(device().is_cpu(), "pin_memory(): only CPU tensors can be pinned, this one is on ",
           device(), ". Hint: pinned memory is host memory; copy to the CPU first.");
  Tensor pinned = empty(sizes(), {.dtype = dtype(), .device = Device::cpu(),
                                  .category = memory_category(), .pin_memory = true});
  kernels(Device::cpu()).copy(*this, pinned);
  return pinned;
}

void Tensor::set_data(const Tensor& other) const {
  checked("set_data");
  MG_CHECK(other.defined(), "set_data: the new data is an undefined tensor");
  MG_CHECK(is_leaf(), "set_data: only leaf tensors can have their data replaced");
  impl_->storage = other.storage();
  impl_->sizes = other.sizes();
  impl_->strides = other.strides();
  impl_->storage_offset = other.storage_offset();
  impl_->dtype = other.dtype();
  impl_->is_contiguous = other.is_contiguous();
}

template <class T>
T Tensor::item() const {
  checked("item");
  MG_CHECK(numel() == 1, "item(): the tensor has ", numel(), " elements (shape ", sizes(),
           "); only one-element tensors can be converted to a number");
  Tensor host = converted_copy(*this, dtype_of<T>, Device::cpu());
  return *static_cast<const T*>(host.raw_data());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  checked("to_vector");
  Tensor host = converted_copy(*this, dtype_of<T>, Device::cpu());
  const T* data = static_cast<const T*>(host.raw_data());
  return std::vector<T>(data, data + host.numel());
}

#define MG_INSTANTIATE_DATA_ACCESS(T) \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
MG_INSTANTIATE_DATA_ACCESS(float)
MG_INSTANTIATE_DATA_ACCESS(double)
MG_INSTANTIATE_DATA_ACCESS(Half)
MG_INSTANTIATE_DATA_ACCESS(BFloat16)
MG_INSTANTIATE_DATA_ACCESS(int64_t)
MG_INSTANTIATE_DATA_ACCESS(int32_t)
MG_INSTANTIATE_DATA_ACCESS(uint8_t)
MG_INSTANTIATE_DATA_ACCESS(bool)
#undef MG_INSTANTIATE_DATA_ACCESS

bool Tensor::requires_grad() const {
  if (!impl_) return false;
  const AutogradMeta* meta = impl_->autograd.get();
  return meta && (meta->requires_grad || meta->grad_fn);
}

const Tensor& Tensor::requires_grad_(bool required) const {
  MG_CHECK(is_leaf(), "requires_grad_(): only leaf tensors can change requires_grad; this tensor ",
           "was computed by ", "an op. Hint: use .detach().requires_grad_() for a new leaf.");
  MG_CHECK(!required || is_floating(dtype()), "requires_grad_(): only floating-point tensors can ",
           "require gradients, this one is ", dtype());
  if (!required && !impl_->autograd) return *this;
  ensure_autograd_meta().requires_grad = required;
  return *this;
}

bool Tensor::is_leaf() const { return !checked("is_leaf").autograd || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const { return checked("grad").autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  checked("set_grad");
  if (grad.defined()) {
    MG_CHECK(grad.sizes() == sizes() && grad.dtype() == dtype() && grad.device() == device(),
             "set_grad: the gradient must match the tensor: got shape ", grad.sizes(), " ",
             grad.dtype(), " on ", grad.device(), " for a tensor of shape ", sizes(), " ",
             dtype(), " on ", device());
  }
  ensure_autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  return impl_ && impl_->autograd ? impl_->autograd->grad_fn : kNone;
}

AutogradMeta& Tensor::ensure_autograd_meta() const {
  if (!checked("ensure_autograd_meta").autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  return *impl_->autograd;
}

Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), sizes, strides, offset, base.dtype()));
}

}  // namespace mg
