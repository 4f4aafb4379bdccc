// autograd/shape.cpp — differentiable views (view, reshape, permute, slice, select,
// squeeze, expand, ...) and joins (cat, stack), forward and backward side by side.
//
// A view is a new TensorImpl over the input's storage (make_view): it allocates no bytes.
// Its backward maps the gradient back to the input's geometry: a reshape for the views
// that only regroup elements, the inverse permutation for permute, a sum for expand, and
// zeros with the gradient copied into the picked part for slice and select.
#include "memgrad/autograd/shape.h"

#include <algorithm>
#include <optional>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

using autograd::Node;
using autograd::needs_grad;
using autograd::record;
using autograd::saved;

// A view of `x` holding the same elements in the same order, only grouped into other
// dims (view, reshape, flatten, squeeze, unsqueeze): its gradient is the output's
// gradient reshaped back to x's sizes.
Tensor regrouped_view(const char* name, const Tensor& x, const Shape& sizes, const Shape& strides) {
  Tensor output = make_view(x, sizes, strides, x.storage_offset());
  if (needs_grad(x)) {
    record(name, output, {x}, saved(), [input_sizes = x.sizes()](const Node&, const Tensor& grad) {
      return std::vector<Tensor>{reshape(grad, input_sizes)};
    });
  }
  return output;
}

// The gradient of a view that picks part of its input (slice, select): zeros of the
// input's sizes with `grad` copied into the same part; `pick` applies the forward view.
template <class Pick>
Tensor embed_in_zeros(const Tensor& grad, const Shape& input_sizes, Pick pick) {
  Tensor grad_input = zeros(input_sizes, {.dtype = grad.dtype(), .device = grad.device()});
  kernels(grad.device()).copy(grad, pick(grad_input));
  return grad_input;
}

// `sizes` with its one allowed -1 replaced by what makes the element count `numel`.
Shape infer_size(const Shape& sizes, int64_t numel) {
  int inferred_dim = -1;
  int64_t known = 1;
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == -1) {
      MG_CHECK(inferred_dim < 0, "only one dimension can be inferred (-1), got shape ", sizes);
      inferred_dim = d;
    } else {
      MG_CHECK(sizes[d] >= 0, "invalid size ", sizes[d], " in shape ", sizes);
      known *= sizes[d];
    }
  }
  Shape result = sizes;
  if (inferred_dim >= 0) {
    // NOTE: with a 0 among the known sizes any value fits -1, so it is ambiguous.
    MG_CHECK(known != 0 && numel % known == 0, "shape ", sizes, " is invalid for input of size ", numel);
    result[inferred_dim] = numel / known;
  }
  MG_CHECK(result.numel() == numel, "shape ", sizes, " is invalid for input of size ", numel,
           ". Hint: the new shape must hold exactly as many elements.");
  return result;
}

// Strides that let `new_sizes` view the elements of a tensor of `sizes`/`strides` in
// row-major order, or nothing when that needs a copy. PyTorch's rule (computeStride):
// walk the old dims from the back in "chunks" of dims that are contiguous with each other;
// every chunk must be exactly covered by a run of new dims.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  // Any strides address a tensor of at most one element; with none, strides are moot.
  if (sizes.numel() <= 1) {
    if (sizes.numel() == 0 && sizes == new_sizes) return strides;
    return contiguous_strides(new_sizes);
  }
  Shape new_strides = Shape::filled(new_sizes.size(), 0);
  int view_d = new_sizes.size() - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int tensor_d = sizes.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= sizes[tensor_d];
    bool chunk_ends = tensor_d == 0 || (sizes[tensor_d - 1] != 1 &&
                                        strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// A slice bound for a dim of `size`: negative counts from the end, and the result is
// clamped into [0, size] as Python slices do.
int64_t clamp_slice_index(int64_t index, int64_t size) {
  if (index < 0) index += size;
  return std::clamp<int64_t>(index, 0, size);
}

// permute, recorded under `name` (transpose is a permute with its own node name).
Tensor permute_as(const char* name, const Tensor& x, const Shape& order) {
  MG_CHECK(order.size() == x.dim(), "permute: the order ", order, " has ", order.size(),
           " entries but the tensor of shape ", x.sizes(), " has ", x.dim(), " dimensions");
  Shape sizes, strides, inverse = Shape::filled(x.dim(), -1);
  for (int i = 0; i < order.size(); ++i) {
    int d = wrap_dim(order[i], x.dim());
    MG_CHECK(inverse[d] < 0, "permute: the order ", order, " repeats dimension ", d,
             " (tensor of shape ", x.sizes(), "). Hint: name every dimension exactly once.");
    inverse[d] = i;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  Tensor output = make_view(x, sizes, strides, x.storage_offset());
  if (needs_grad(x)) {
    record(name, output, {x}, saved(), [inverse](const Node&, const Tensor& grad) {
      return std::vector<Tensor>{permute(grad, inverse)};
    });
  }
  return output;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& sizes) {
  Shape new_sizes = infer_size(sizes, x.numel());
  std::optional<Shape> new_strides = view_strides(x.sizes(), x.strides(), new_sizes);
  MG_CHECK(new_strides.has_value(), "view size is not compatible with input tensor's size and stride: "
           "cannot view a tensor of shape ", x.sizes(), " (strides ", x.strides(), ") as shape ",
           new_sizes, ": at least one requested dimension spans two non-contiguous parts of the "
           "input. Hint: use .reshape(...) instead, which copies when it must.");
  return regrouped_view("ViewBackward", x, new_sizes, *new_strides);
}

Tensor reshape(const Tensor& x, const Shape& sizes) {
  Shape new_sizes = infer_size(sizes, x.numel());
  if (std::optional<Shape> new_strides = view_strides(x.sizes(), x.strides(), new_sizes)) {
    return regrouped_view("ViewBackward", x, new_sizes, *new_strides);
  }
  return regrouped_view("ViewBackward", contiguous(x), new_sizes, contiguous_strides(new_sizes));
}

Tensor permute(const Tensor& x, const Shape& order) { return permute_as("PermuteBackward", x, order); }

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  int first = wrap_dim(dim0, x.dim()), second = wrap_dim(dim1, x.dim());
  Shape order;
  for (int d = 0; d < x.dim(); ++d) order.push_back(d);
  // A 0-d tensor accepts dims 0 and -1 and has nothing to swap.
  if (x.dim() > 0) std::swap(order[first], order[second]);
  return permute_as("TransposeBackward", x, order);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  MG_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  MG_CHECK(start >= -size && start <= size, "narrow: start ", start, " is out of range for dimension ",
           d, " of size ", size, " (tensor of shape ", x.sizes(), ")");
  if (start < 0) start += size;
  MG_CHECK(length >= 0 && start + length <= size, "narrow: start ", start, " + length ", length,
           " exceeds dimension ", d, " of size ", size, " (tensor of shape ", x.sizes(), ")");
  return slice(x, d, start, start + length);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  MG_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  int d = wrap_dim(dim, x.dim());
  MG_CHECK(step > 0, "slice: step must be positive, got ", step, " (tensor of shape ", x.sizes(),
           "). Hint: negative steps are not supported; flip the result instead.");
  int64_t size = x.sizes()[d];
  start = clamp_slice_index(start, size);
  end = std::max(clamp_slice_index(end, size), start);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor output = make_view(x, sizes, strides, x.storage_offset() + start * x.strides()[d]);
  if (needs_grad(x)) {
    record("SliceBackward", output, {x}, saved(),
           [input_sizes = x.sizes(), d, start, end, step](const Node&, const Tensor& grad) {
             return std::vector<Tensor>{embed_in_zeros(grad, input_sizes, [&](const Tensor& zero) {
               return slice(zero, d, start, end, step);
             })};
           });
  }
  return output;
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  MG_CHECK(x.dim() > 0, "select: cannot select from a 0-d tensor");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  MG_CHECK(index >= -size && index < size, "select: index ", index, " is out of range for dimension ",
           d, " of size ", size, " (tensor of shape ", x.sizes(), ")");
  if (index < 0) index += size;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(d);
  strides.erase(d);
  Tensor output = make_view(x, sizes, strides, x.storage_offset() + index * x.strides()[d]);
  if (needs_grad(x)) {
    record("SelectBackward", output, {x}, saved(),
           [input_sizes = x.sizes(), d, index](const Node&, const Tensor& grad) {
             return std::vector<Tensor>{
                 embed_in_zeros(grad, input_sizes, [&](const Tensor& zero) { return select(zero, d, index); })};
           });
  }
  return output;
}

Tensor squeeze(const Tensor& x) {
  Shape sizes, strides;
  for (int d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] == 1) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return regrouped_view("SqueezeBackward", x, sizes, strides);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  int d = wrap_dim(dim, x.dim());
  Shape sizes = x.sizes(), strides = x.strides();
  // As in PyTorch, a dim whose size is not 1 (or a 0-d tensor) is left alone.
  if (x.dim() > 0 && sizes[d] == 1) {
    sizes.erase(d);
    strides.erase(d);
  }
  return regrouped_view("SqueezeBackward", x, sizes, strides);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int d = wrap_dim(dim, x.dim() + 1);
  Shape sizes = x.sizes(), strides = x.strides();
  // The new dim's stride is never used to step (its size is 1); this value keeps a
  // contiguous input contiguous.
  int64_t stride = d < x.dim() ? sizes[d] * strides[d] : 1;
  sizes.insert(d, 1);
  strides.insert(d, stride);
  return regrouped_view("UnsqueezeBackward", x, sizes, strides);
}

Tensor expand(const Tensor& x, const Shape& sizes) {
  MG_CHECK(sizes.size() >= x.dim(), "expand: the requested shape ", sizes, " has fewer dimensions than ",
           "the tensor of shape ", x.sizes(), ". Hint: expand can add leading dimensions, not remove them.");
  int new_dims = sizes.size() - x.dim();
  Shape out_sizes = sizes, out_strides = Shape::filled(sizes.size(), 0);
  for (int d = 0; d < sizes.size(); ++d) {
    int source_d = d - new_dims;
    if (source_d < 0) {
      MG_CHECK(sizes[d] >= 0, "expand: size ", sizes[d], " is not allowed for the new leading dimension ",
               d, " (requested shape ", sizes, ", tensor of shape ", x.sizes(), ")");
      continue;  // stride 0: every index repeats the whole input
    }
    int64_t size = x.sizes()[source_d];
    if (sizes[d] == -1 || sizes[d] == size) {
      out_sizes[d] = size;
      out_strides[d] = x.strides()[source_d];
    } else {
      MG_CHECK(size == 1 && sizes[d] >= 0, "expand: the expanded size ", sizes[d],
               " must match the existing size ", size, " at non-singleton dimension ", d,
               " (requested shape ", sizes, ", tensor of shape ", x.sizes(),
               "). Hint: only dimensions of size 1 can be expanded; use repeat-like copies otherwise.");
    }
  }
  Tensor output = make_view(x, out_sizes, out_strides, x.storage_offset());
  if (needs_grad(x)) {
    record("ExpandBackward", output, {x}, saved(), [input_sizes = x.sizes()](const Node&, const Tensor& grad) {
      return std::vector<Tensor>{sum_to_size(grad, input_sizes)};
    });
  }
  return output;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  int start = wrap_dim(start_dim, x.dim()), end = wrap_dim(end_dim, x.dim());
  MG_CHECK(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim,
           " (tensor of shape ", x.sizes(), ")");
  if (start == end) return x;
  Shape sizes;
  for (int d = 0; d < start; ++d) sizes.push_back(x.sizes()[d]);
  int64_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= x.sizes()[d];
  sizes.push_back(merged);
  for (int d = end + 1; d < x.dim(); ++d) sizes.push_back(x.sizes()[d]);
  return reshape(x, sizes);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  MG_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) autograd::check_defined("cat", tensors[i]);
  const Tensor& first = tensors[0];
  MG_CHECK(first.dim() > 0, "cat: zero-dimensional tensor (at index 0) cannot be concatenated. "
           "Hint: use stack, or unsqueeze it first.");
  int d = wrap_dim(dim, first.dim());
  Shape out_sizes = first.sizes();
  out_sizes[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i];
    MG_CHECK(tensor.dtype() == first.dtype() && tensor.device() == first.device(), "cat: tensor ", i,
             " is ", tensor.dtype(), " on ", tensor.device(), " (shape ", tensor.sizes(), ") but tensor 0 is ",
             first.dtype(), " on ", first.device(), " (shape ", first.sizes(),
             "). Hint: convert with .to(...) so all share one dtype and device.");
    bool sizes_match = tensor.dim() == first.dim();
    for (int k = 0; sizes_match && k < first.dim(); ++k) {
      sizes_match = k == d || tensor.sizes()[k] == first.sizes()[k];
    }
    MG_CHECK(sizes_match, "cat: sizes of tensors must match except in dimension ", d, ": tensor ", i,
             " has shape ", tensor.sizes(), " but tensor 0 has shape ", first.sizes());
    out_sizes[d] += tensor.sizes()[d];
  }

  Tensor output = autograd::new_output(out_sizes, first.dtype(), first);
  std::vector<int64_t> lengths;
  lengths.reserve(tensors.size());
  int64_t offset = 0;
  for (const Tensor& tensor : tensors) {
    int64_t length = tensor.sizes()[d];
    kernels(output.device()).copy(tensor, narrow(output, d, offset, length));
    lengths.push_back(length);
    offset += length;
  }
  if (autograd::any_needs_grad(tensors)) {
    record("CatBackward", output, tensors, saved(),
           [d, lengths = std::move(lengths)](const Node& node, const Tensor& grad) {
             std::vector<Tensor> grads(lengths.size());
             int64_t start = 0;
             for (size_t i = 0; i < lengths.size(); ++i) {
               if (node.needs_input_grad(i)) grads[i] = narrow(grad, d, start, lengths[i]);
               start += lengths[i];
             }
             return grads;
           });
  }
  return output;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  MG_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  autograd::check_defined("stack", tensors[0]);
  int d = wrap_dim(dim, tensors[0].dim() + 1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    autograd::check_defined("stack", tensors[i]);
    MG_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be of equal size, "
             "but tensor 0 has shape ", tensors[0].sizes(), " and tensor ", i, " has shape ", tensors[i].sizes());
  }
  std::vector<Tensor> unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const Tensor& tensor : tensors) unsqueezed.push_back(unsqueeze(tensor, d));
  return cat(unsqueezed, d);
}

// ---- Tensor methods ----

Tensor Tensor::view(const Shape& sizes) const { return mg::view(*this, sizes); }
Tensor Tensor::reshape(const Shape& sizes) const { return mg::reshape(*this, sizes); }
Tensor Tensor::permute(const Shape& order) const { return mg::permute(*this, order); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return mg::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const {
  MG_CHECK(dim() == 2, "t(): expects a 2-D tensor, got shape ", sizes(),
           ". Hint: use transpose(dim0, dim1) or permute(order) for other ranks.");
  return mg::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return mg::narrow(*this, dim, start, length);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return mg::slice(*this, dim, start, end, step);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return mg::select(*this, dim, index); }
Tensor Tensor::squeeze() const { return mg::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return mg::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return mg::unsqueeze(*this, dim); }
Tensor Tensor::expand(const Shape& sizes) const { return mg::expand(*this, sizes); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return mg::flatten(*this, start_dim, end_dim); }

}  // namespace mg
