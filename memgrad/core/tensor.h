// core/tensor.h — Tensor: a handle to sizes, strides and an offset into a shared Storage.
//
// Copying a Tensor copies the handle (like PyTorch): both names refer to the same tensor.
// This header declares the whole user-facing method set. Methods about data and metadata
// are defined in core/tensor.cpp; the differentiable ones (views, arithmetic, reductions,
// backward) are declared here for convenience but defined next to their op in autograd/
// (shape.cpp, reduce.cpp, elementwise.cpp, ...), as PyTorch's TensorBody does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/memory_category.h"
#include "memgrad/core/shape.h"
#include "memgrad/core/storage.h"

namespace mg {

namespace autograd {
class Node;
}

class Tensor;
struct AutogradMeta;
namespace indexing {
class TensorIndex;  // core/tensor_index.h
}
enum class MemoryFormat;  // core/memory_format.h

// What a tensor is: its view of a storage, and (for tensors that take part in autograd)
// its autograd metadata.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;  // in elements
  int64_t storage_offset = 0;  // in elements
  DType dtype = DType::Float32;
  bool is_contiguous = true;
  std::unique_ptr<AutogradMeta> autograd;  // null until the tensor takes part in autograd

  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
             DType dtype);
  ~TensorImpl();
};

using TensorHook = std::function<Tensor(const Tensor& grad)>;
// Runs with the leaf itself once backward has accumulated into its .grad.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // False for a default-constructed handle (`mg::Tensor loss;`). On such a handle every
  // accessor and op throws mg::Error naming what was asked, except requires_grad() (false)
  // and grad_fn() (null), which answer as PyTorch's do for an absent optional input.
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // True when both handles name the same tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- metadata (core/tensor.cpp) ----
  const Shape& sizes() const { return checked("sizes").sizes; }
  const Shape& shape() const { return checked("shape").sizes; }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return checked("strides").strides; }
  int64_t stride(int64_t dim) const;
  int dim() const { return checked("dim").sizes.size(); }
  int64_t numel() const { return checked("numel").sizes.numel(); }
  DType dtype() const { return checked("dtype").dtype; }
  Device device() const { return checked("device").storage->device(); }
  int64_t storage_offset() const { return checked("storage_offset").storage_offset; }
  bool is_contiguous() const { return checked("is_contiguous").is_contiguous; }
  size_t element_size() const { return mg::element_size(checked("element_size").dtype); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const std::shared_ptr<Storage>& storage() const { return checked("storage").storage; }
  // True when the bytes are page-locked host memory (see TensorOptions::pin_memory).
  bool is_pinned() const { return checked("is_pinned").storage->is_pinned(); }
  // A contiguous copy in pinned host memory (this tensor itself when already pinned), so
  // that to(Device::cuda(), /*non_blocking=*/true) need not wait. CPU tensors only; the
  // copy keeps the memory category and, like detach(), has no autograd history.
  Tensor pin_memory() const;

  // Address of the first element; throws if T does not match the dtype.
  template <class T>
  T* data_ptr() const;
  void* raw_data() const;

  MemoryCategory memory_category() const { return checked("memory_category").storage->category(); }
  // Re-tags the tensor's whole storage (e.g. PARAMETER at registration).
  const Tensor& set_memory_category(MemoryCategory category) const;

  // Version of the storage, bumped by every in-place write through any view.
  uint64_t version() const { return checked("version").storage->version(); }
  void bump_version() const { checked("bump_version").storage->bump_version(); }

  // The single value of a one-element tensor, copied to the host (synchronises on CUDA).
  template <class T = double>
  T item() const;
  // All values in row-major order, copied to the host.
  template <class T>
  std::vector<T> to_vector() const;

  // PyTorch-like repr: tensor([[1.0000, 2.0000]], grad_fn=<MulBackward>)
  std::string str() const;

  // Makes this tensor (and every handle to it) use `other`'s storage, sizes and dtype,
  // keeping its autograd identity (requires_grad, hooks). How modules move their
  // parameters to another device or dtype in place, as PyTorch's set_data.
  void set_data(const Tensor& other) const;

  // ---- autograd state (core/tensor.cpp) ----
  bool requires_grad() const;
  // Makes a leaf tensor require (or stop requiring) gradients; only floating dtypes can.
  const Tensor& requires_grad_(bool required = true) const;
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  AutogradMeta* autograd_meta() const { return checked("autograd_meta").autograd.get(); }
  AutogradMeta& ensure_autograd_meta() const;

  // ---- autograd (autograd/backward.cpp) ----
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // `hook(grad)` runs when this tensor's gradient is computed; a defined result replaces it.
  void register_hook(TensorHook hook) const;
  // Keeps .grad for a non-leaf tensor.
  void retain_grad() const;
  // (autograd/accumulate_grad.cpp) Leaves that require grad only: `hook(leaf)` runs each
  // time backward has accumulated a gradient into this leaf's .grad (after the hooks of
  // register_hook and the accumulation itself), as PyTorch's
  // register_post_accumulate_grad_hook; how data-parallel training learns that a
  // gradient is ready to be reduced. Returns an id for remove_post_accumulate_grad_hook.
  uint64_t register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  // Removes the hook `id` names; an id already removed is ignored.
  void remove_post_accumulate_grad_hook(uint64_t id) const;

  // ---- differentiable ops, each defined in its family's file in autograd/ ----
  // copy.cpp
  Tensor detach() const;  // same storage, no history
  Tensor clone() const;   // new storage, gradient flows back
  Tensor contiguous() const;
  Tensor contiguous(MemoryFormat format) const;  // core/memory_format.h
  Tensor to(DType dtype) const;
  Tensor to(Device device, bool non_blocking = false) const;

  // shape.cpp
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;
  Tensor permute(const Shape& order) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& sizes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // indexing.cpp: rows along `dim` picked by a 1-d int64 `index` (PyTorch's index_select),
  // and out[i][j] = self[index[i][j]][j] along dim 0 and so on (PyTorch's gather).
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  // libtorch's x.index({Slice(), 0}): integers, Slice(start, stop, step), None, Ellipsis
  // and int64 index tensors (core/tensor_index.h, namespace mg::indexing).
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  // x[i] is x.select(0, i), as in PyTorch.
  Tensor operator[](int64_t index) const;

  // reduce.cpp
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor amax(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;

  // unary.cpp
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor pow(double exponent) const;  // elementwise.cpp
  Tensor matmul(const Tensor& other) const;  // matmul.cpp
  // softmax.cpp
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- in-place (autograd/inplace.cpp): not differentiable; they bump the version ----
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& add_(double value) const;
  const Tensor& sub_(const Tensor& other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double value) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(double value) const;
  const Tensor& zero_() const;
  const Tensor& fill_(double value) const;
  const Tensor& copy_(const Tensor& source) const;

 private:
  // The impl, or an mg::Error naming `accessor` when this handle is undefined (a
  // default-constructed mg::Tensor, as in `mg::Tensor loss;` before it is assigned).
  TensorImpl& checked(const char* accessor) const {
    if (!impl_) [[unlikely]] throw_undefined(accessor);
    return *impl_;
  }
  [[noreturn]] static void throw_undefined(const char* accessor);

  std::shared_ptr<TensorImpl> impl_;
};

// Autograd's per-tensor state. Defined here (rather than in autograd/) so that core can
// hold it by value; only autograd/ acts on it.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that fills .grad
  std::vector<TensorHook> hooks;
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_grad_hooks;  // by id
  bool retains_grad = false;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// A new tensor viewing `base`'s storage with other sizes/strides/offset (no copy, no
// autograd: the differentiable view ops in autograd/shape.cpp are built on it).
Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset);

// ---- template definitions ----

template <class T>
T* Tensor::data_ptr() const {
  MG_CHECK(dtype_of<T> == dtype(), "data_ptr: the tensor holds ", dtype(), ", not ",
           dtype_of<T>, ". Hint: convert with .to(", dtype_of<T>, ") first.");
  return static_cast<T*>(raw_data());
}

}  // namespace mg
