// autograd/copy.cpp — clone, detach, contiguous and to(dtype / device), forward and
// backward side by side.
//
// What each costs in memory is the point of this file: detach allocates nothing (a new
// TensorImpl over the same storage); clone, contiguous (when it must copy) and to (when
// something changes) allocate exactly one tensor's bytes; when nothing changes,
// contiguous and to return the input itself. to_each allocates what to() of each would.
#include "memgrad/autograd/copy.h"

#include <algorithm>

#include "memgrad/autograd/accumulate_grad.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/core/memory_format.h"

namespace mg {

namespace {

using autograd::Node;
using autograd::needs_grad;
using autograd::record;
using autograd::saved;

// Whether the conversion's gradient may go to its input unconverted: a leaf on the same
// device that converts it itself, batched with others at backward's end (autocast's
// parameters, autograd/accumulate_grad.h).
bool leaf_converts_later(const Node& conversion, Device input_device, const Tensor& grad) {
  const auto* leaf = dynamic_cast<const autograd::AccumulateGrad*>(conversion.next_edges()[0].function.get());
  return leaf != nullptr && grad.device() == input_device && leaf->takes_unconverted_gradient();
}

// Makes `output`, x's values converted, differentiable: the gradient is converted back
// (waiting for the transfer: the gradient's host side is never pinned). It flows only into
// a floating dtype: an integer copy's values are not differentiable.
void record_conversion(const Tensor& x, const Tensor& output) {
  if (needs_grad(x) && is_floating(output.dtype())) {
    record("ToCopyBackward", output, {x}, saved(),
           [input_dtype = x.dtype(), input_device = x.device()](const Node& node, const Tensor& grad) {
             if (leaf_converts_later(node, input_device, grad)) return std::vector<Tensor>{grad};
             return std::vector<Tensor>{
                 converted_copy(grad, input_dtype, input_device, false, suggest_memory_format(grad))};
           });
  }
}

// A copy of x converted to dtype and device, in x's memory format (as PyTorch's .to keeps
// a channels_last tensor channels_last: autocast's casts of channels_last weights and
// batches must not hand cuDNN row-major copies).
Tensor converted(const Tensor& x, DType dtype, Device device, bool non_blocking = false) {
  Tensor output = converted_copy(x, dtype, device, non_blocking, suggest_memory_format(x));
  record_conversion(x, output);
  return output;
}

// Whether the kernel table's convert_each takes x to dtype: a tensor dense in its layout,
// float32 to a 16-bit floating dtype or back.
bool converts_in_batch(const Tensor& x, DType dtype) {
  const bool pair = (x.dtype() == DType::Float32 && is_16_bit_float(dtype)) ||
                    (is_16_bit_float(x.dtype()) && dtype == DType::Float32);
  return pair && is_contiguous_in(x, suggest_memory_format(x));
}

// The tensors of one device that go through one convert_each call, and their results.
struct DeviceBatch {
  Device device;
  std::vector<Tensor> sources;
  std::vector<Tensor> destinations;
};

}  // namespace

Tensor clone(const Tensor& x) {
  Tensor output = contiguous_copy(x);
  if (needs_grad(x)) {
    record("CloneBackward", output, {x}, saved(), [](const Node&, const Tensor& grad) {
      return std::vector<Tensor>{grad};
    });
  }
  return output;
}

Tensor detach(const Tensor& x) { return make_view(x, x.sizes(), x.strides(), x.storage_offset()); }

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor contiguous(const Tensor& x, MemoryFormat format) {
  if (is_contiguous_in(x, format)) return x;
  Tensor output = contiguous_copy(x, format);
  if (needs_grad(x)) {
    record("ContiguousBackward", output, {x}, saved(), [](const Node&, const Tensor& grad) {
      return std::vector<Tensor>{grad};
    });
  }
  return output;
}

Tensor to(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : converted(x, dtype, x.device()); }

std::vector<Tensor> to_each(std::span<const Tensor> tensors, DType dtype) {
  std::vector<Tensor> outputs(tensors.size());
  std::vector<DeviceBatch> batches;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& x = tensors[i];
    if (!converts_in_batch(x, dtype)) {
      outputs[i] = to(x, dtype);
      continue;
    }
    // Allocated as converted_copy allocates for to(): same bytes, same layout, same category.
    outputs[i] = empty(x.sizes(), {.dtype = dtype, .device = x.device()}, suggest_memory_format(x));
    auto batch = std::find_if(batches.begin(), batches.end(),
                              [&](const DeviceBatch& candidate) { return candidate.device == x.device(); });
    if (batch == batches.end()) batch = batches.insert(batches.end(), DeviceBatch{x.device(), {}, {}});
    batch->sources.push_back(x);
    batch->destinations.push_back(outputs[i]);
  }
  for (const DeviceBatch& batch : batches) {
    kernels(batch.device).convert_each(batch.sources, batch.destinations);
    for (size_t i = 0; i < batch.sources.size(); ++i) record_conversion(batch.sources[i], batch.destinations[i]);
  }
  return outputs;
}

// NOTE: non_blocking makes a copy from pinned host memory return before the transfer ends;
// from pageable memory the copy waits regardless (the host bytes could change under it).
Tensor to(const Tensor& x, Device device, bool non_blocking) {
  return x.device() == device ? x : converted(x, x.dtype(), device, non_blocking);
}

// ---- Tensor methods ----

Tensor Tensor::detach() const { return mg::detach(*this); }
Tensor Tensor::clone() const { return mg::clone(*this); }
Tensor Tensor::contiguous() const { return mg::contiguous(*this); }
Tensor Tensor::contiguous(MemoryFormat format) const { return mg::contiguous(*this, format); }
Tensor Tensor::to(DType dtype) const { return mg::to(*this, dtype); }
Tensor Tensor::to(Device device, bool non_blocking) const { return mg::to(*this, device, non_blocking); }

}  // namespace mg
