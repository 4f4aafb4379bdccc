// autograd/indexing.cpp — index_select, gather and Tensor::index, forward and backward.
//
// One primitive: gather (kernels' gather and scatter_add). index_select is a gather whose
// index is the 1-d index seen with stride 0 in every other dim (a view: no index of the
// output's size is built), so both ops share their kernels and their backward, a
// scatter-add of the incoming gradient into zeros of the input's shape. The backward sums
// in float32 for 16-bit inputs (a 16-bit running sum would round after every add) and
// converts once. The nodes save only the int64 index.
//
// Tensor::index is a composite: integers, slices, None and Ellipsis are the view ops of
// autograd/shape.cpp (select, slice, unsqueeze), a tensor entry an index_select, so every
// gradient comes from those ops.
//
// Out-of-range indices: on the CPU every index is checked before the kernel (the error
// names the value, its position, the dim and the size). On CUDA that check would need the
// index on the host (a synchronisation per op), so the kernel checks, writes a zero, and
// cuda/device_error.h raises the error at the next synchronisation, as embedding does.
#include "memgrad/autograd/indexing.h"

#include <limits>
#include <sstream>
#include <string>
#include <variant>

#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/shape.h"

namespace mg {

namespace {

void check_index_tensor(const char* op, const Tensor& input, const Tensor& index) {
  autograd::check_defined(op, input);
  autograd::check_defined(op, index);
  MG_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op, ": expected an int64 or int32 index, got ",
           index.dtype(), " of shape ", index.sizes(), ". Hint: convert with .to(mg::DType::Int64).");
  MG_CHECK(index.device() == input.device(), op, ": expected the index on the input's device ", input.device(),
           ", got ", index.device(), " (index of shape ", index.sizes(), "). Hint: move it with .to(",
           input.device(), ").");
  MG_CHECK(input.dim() > 0, op, ": expected an input of at least one dimension, got a 0-d tensor. Hint: ",
           "reshape it to (1) first.");
}

Tensor as_int64(const Tensor& index) {
  return index.dtype() == DType::Int64 ? index : converted_copy(index, DType::Int64, index.device());
}

// On the CPU, throws naming the first index outside [0, size of dim).
void check_bounds_on_host(const char* op, const Tensor& index, const Tensor& input, int dim) {
  if (!index.device().is_cpu()) return;  // the CUDA kernel checks (see the top of the file)
  const Tensor dense = index.is_contiguous() ? index : contiguous_copy(index);
  const int64_t* values = dense.data_ptr<int64_t>();
  const int64_t size = input.sizes()[dim];
  for (int64_t n = 0; n < dense.numel(); ++n) {
    MG_CHECK(values[n] >= 0 && values[n] < size, op, ": index ", values[n], " at position ", n,
             " of the (flattened) index of shape ", index.sizes(), " is out of range for dimension ", dim,
             " of size ", size, " (input shape ", input.sizes(), "). Hint: every index must lie in [0, ", size,
             "); negative indices do not count from the end here.");
  }
}

// index (1-d) seen with the sizes of index_select's output: stride 0 in every dim but dim.
Tensor index_along(const Tensor& index, const Shape& output_sizes, int dim) {
  Shape strides = Shape::filled(output_sizes.size(), 0);
  strides[dim] = index.strides()[0];
  return make_view(index, output_sizes, strides, index.storage_offset());
}

// The gradient of a gather of `input_sizes` along dim by `index`: grad scattered-added
// into zeros, summed in float32 (float64 for float64) and returned in `dtype`.
Tensor scatter_add_into_zeros(const Tensor& grad, int dim, const Tensor& index, const Shape& input_sizes,
                              DType dtype) {
  const DType sum_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor grad_input = zeros(input_sizes, {.dtype = sum_dtype, .device = grad.device()});
  if (grad.numel() > 0) kernels(grad.device()).scatter_add(grad, dim, index, grad_input);
  return sum_dtype == dtype ? grad_input : converted_copy(grad_input, dtype, grad.device());
}

// gather of `index` (int64, output's sizes) from input along dim, recorded under `name`;
// `saved_index` is what backward needs to rebuild `index` (itself, or index_select's 1-d one).
Tensor gather_recorded(const char* name, const Tensor& input, int dim, const Tensor& index,
                       const Tensor& saved_index) {
  Tensor output = autograd::new_output(index.sizes(), input.dtype(), input);
  if (output.numel() > 0) kernels(input.device()).gather(input, dim, index, output);
  if (autograd::needs_grad(input)) {
    const bool rebuild_view = !saved_index.is_same(index);
    autograd::record(name, output, {input}, autograd::saved(saved_index),
                     [dim, rebuild_view, input_sizes = input.sizes(), dtype = input.dtype()](
                         const autograd::Node&, const Tensor& grad, const Tensor& saved) {
                       Tensor full_index = rebuild_view ? index_along(saved, grad.sizes(), dim) : saved;
                       return std::vector<Tensor>{scatter_add_into_zeros(grad, dim, full_index, input_sizes, dtype)};
                     });
  }
  return output;
}

}  // namespace

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
  check_index_tensor("index_select", input, index);
  MG_CHECK(index.dim() <= 1, "index_select: expected a 1-d (or 0-d) index, got shape ", index.sizes(),
           ". Hint: flatten it, or use gather for an index of the input's rank.");
  const int d = wrap_dim(dim, input.dim());
  Tensor flat = as_int64(index.dim() == 1 ? index : index.reshape({1}));
  check_bounds_on_host("index_select", flat, input, d);
  Shape output_sizes = input.sizes();
  output_sizes[d] = flat.numel();
  return gather_recorded("IndexSelectBackward", input, d, index_along(flat, output_sizes, d), flat);
}

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  check_index_tensor("gather", input, index);
  MG_CHECK(index.dim() == input.dim(), "gather: expected an index of the input's rank ", input.dim(),
           ", got shape ", index.sizes(), " for input of shape ", input.sizes(),
           ". Hint: for a 1-d index along one dim, use index_select.");
  const int d = wrap_dim(dim, input.dim());
  for (int k = 0; k < input.dim(); ++k) {
    MG_CHECK(k == d || index.sizes()[k] <= input.sizes()[k], "gather: index of shape ", index.sizes(),
             " is larger than the input of shape ", input.sizes(), " in dimension ", k,
             " (only dimension ", d, ", the one gathered along, may be larger)");
  }
  Tensor index64 = as_int64(index);
  check_bounds_on_host("gather", index64, input, d);
  return gather_recorded("GatherBackward", input, d, index64, index64);
}

namespace {

using indexing::EllipsisIndex;
using indexing::NoneIndex;
using indexing::Slice;
using indexing::TensorIndex;

// How one entry reads in Python, for error messages: 0, 1:None:2, None, ..., tensor([3]).
std::string describe(const TensorIndex& entry) {
  std::ostringstream out;
  auto bound = [&](const std::optional<int64_t>& value) {
    if (value) out << *value;
  };
  const TensorIndex::Value& value = entry.value();
  if (const int64_t* integer = std::get_if<int64_t>(&value)) {
    out << *integer;
  } else if (const Slice* slice = std::get_if<Slice>(&value)) {
    bound(slice->start);
    out << ':';
    bound(slice->stop);
    if (slice->step != 1) out << ':' << slice->step;
  } else if (std::holds_alternative<NoneIndex>(value)) {
    out << "None";
  } else if (std::holds_alternative<EllipsisIndex>(value)) {
    out << "...";
  } else {
    const Tensor& tensor = std::get<Tensor>(value);
    out << "tensor of shape " << (tensor.defined() ? tensor.sizes().str() : std::string("undefined"));
  }
  return out.str();
}

std::string describe(const std::vector<TensorIndex>& indices) {
  std::string text = "[";
  for (size_t k = 0; k < indices.size(); ++k) text += (k ? ", " : "") + describe(indices[k]);
  return text + "]";
}

// x indexed along `dim` by an int64/int32 tensor of any rank: index_select by its
// flattened values, its dims put where dim was.
Tensor index_by_tensor(const Tensor& x, int dim, const Tensor& index) {
  Tensor selected = index_select(x, dim, index.dim() == 1 ? index : index.reshape({index.numel()}));
  if (index.dim() == 1) return selected;
  Shape sizes;
  for (int k = 0; k < dim; ++k) sizes.push_back(x.sizes()[k]);
  for (int64_t size : index.sizes()) sizes.push_back(size);
  for (int k = dim + 1; k < x.dim(); ++k) sizes.push_back(x.sizes()[k]);
  return selected.reshape(sizes);
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  autograd::check_defined("index", x);
  int consumed = 0, ellipses = 0, tensors = 0;
  for (const TensorIndex& entry : indices) {
    const TensorIndex::Value& value = entry.value();
    if (std::holds_alternative<EllipsisIndex>(value)) {
      ++ellipses;
    } else if (!std::holds_alternative<NoneIndex>(value)) {
      ++consumed;
    }
    if (const Tensor* tensor = std::get_if<Tensor>(&value)) {
      ++tensors;
      MG_CHECK(tensor->defined(), "index: entry ", describe(indices), " holds an undefined tensor");
      MG_CHECK(tensor->dtype() != DType::Bool, "index: boolean masks are not supported (the result's shape would ",
               "depend on the data), in ", describe(indices), ". Hint: use mg::masked_fill, or pass the positions ",
               "as an int64 tensor.");
    }
  }
  MG_CHECK(ellipses <= 1, "index: an index can only have a single Ellipsis, got ", ellipses, " in ",
           describe(indices));
  MG_CHECK(consumed <= x.dim(), "index: too many indices for a tensor of ", x.dim(), " dimension(s) (shape ",
           x.sizes(), "): ", describe(indices), " indexes ", consumed, ". Hint: None and Ellipsis take no dimension; ",
           "every other entry takes one.");
  MG_CHECK(tensors <= 1, "index: at most one tensor entry is supported, got ", tensors, " in ", describe(indices),
           ". Hint: index one dimension at a time (x.index({a}).index({Slice(), b}) picks every pair, "
           "unlike PyTorch's x[a, b], which pairs them up).");

  Tensor result = x;
  int result_dim = 0;  // where the next entry applies in `result`
  int source_dim = 0;  // the same place in x, for error messages
  for (const TensorIndex& entry : indices) {
    const TensorIndex::Value& value = entry.value();
    if (const int64_t* integer = std::get_if<int64_t>(&value)) {
      const int64_t size = result.sizes()[result_dim];
      MG_CHECK(*integer >= -size && *integer < size, "index: index ", *integer, " is out of range for dimension ",
               source_dim, " of size ", size, " (tensor of shape ", x.sizes(), ", indices ", describe(indices),
               "). Hint: valid integers lie in [", -size, ", ", size - 1, "].");
      result = select(result, result_dim, *integer);
      ++source_dim;
    } else if (const Slice* slice = std::get_if<Slice>(&value)) {
      MG_CHECK(slice->step > 0, "index: a slice's step must be positive, got ", slice->step, " in ",
               describe(indices), ". Hint: negative steps are not supported; flip the result instead.");
      result = mg::slice(result, result_dim, slice->start.value_or(0),
                         slice->stop.value_or(std::numeric_limits<int64_t>::max()), slice->step);
      ++result_dim;
      ++source_dim;
    } else if (std::holds_alternative<NoneIndex>(value)) {
      result = unsqueeze(result, result_dim);
      ++result_dim;
    } else if (std::holds_alternative<EllipsisIndex>(value)) {
      result_dim += x.dim() - consumed;
      source_dim += x.dim() - consumed;
    } else {
      const Tensor& tensor = std::get<Tensor>(value);
      result = index_by_tensor(result, result_dim, tensor);
      result_dim += tensor.dim();
      ++source_dim;
    }
  }
  return result;
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return mg::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return mg::gather(*this, dim, index); }
Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const { return mg::index(*this, indices); }
Tensor Tensor::operator[](int64_t index) const { return select(0, index); }

}  // namespace mg
