// core/factory.cpp — tensor creation. Every tensor's bytes come from its device's caching
// allocator, tagged with the category the options give.
#include "memgrad/core/factory.h"

#include <cmath>

#include "memgrad/core/allocator/allocator_observer.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"

namespace mg {

namespace {

Tensor finish(const Tensor& tensor, const TensorOptions& options) {
  if (options.requires_grad) tensor.requires_grad_(true);
  return tensor;
}

// Pinned host memory has its own caching allocator in cuda/ (page-locking is slow, so its
// blocks are cached too); it is not the CPU's allocator, and so not in snapshot(cpu).
std::shared_ptr<Storage> make_storage(size_t nbytes, Device device, MemoryCategory category,
                                      bool pin_memory) {
  if (!pin_memory) return std::make_shared<Storage>(nbytes, device, category);
  MG_CHECK(device.is_cpu(), "pin_memory applies to CPU tensors only, not to ", device,
           ". Hint: pin the host tensor, then copy it with .to(", device,
           ", /*non_blocking=*/true).");
#ifdef MG_WITH_CUDA
  return std::make_shared<Storage>(nbytes, cuda::pinned_host_allocator(), category);
#else
  MG_CHECK(false, "pin_memory needs CUDA: memgrad was built without CUDA support. Hint: "
           "leave pin_memory off on a CPU-only build (there is no device to copy to).");
#endif
}

Tensor allocate(const Shape& sizes, DType dtype, Device device, MemoryCategory category,
                bool pin_memory = false, MemoryFormat format = MemoryFormat::Contiguous) {
  for (int64_t size : sizes) {
    MG_CHECK(size >= 0, "cannot create a tensor with a negative size: ", sizes);
  }
  size_t nbytes = static_cast<size_t>(sizes.numel()) * element_size(dtype);
  auto storage = make_storage(nbytes, device, category, pin_memory);
  // For whoever listens (a memory::Recorder's live-tensor report): the shape this block was made for.
  if (AllocatorObserver* observer = allocator_observer()) observer->on_tensor_allocated(storage->data(), sizes, dtype);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, strides_for(sizes, format),
                                             0, dtype));
}

}  // namespace

Tensor empty(const Shape& sizes, const TensorOptions& options) {
  return finish(allocate(sizes, options.dtype, options.device, options.category,
                         options.pin_memory),
                options);
}

Tensor empty(const Shape& sizes, const TensorOptions& options, MemoryFormat format) {
  return finish(allocate(sizes, options.dtype, options.device, options.category,
                         options.pin_memory, format),
                options);
}

Tensor full(const Shape& sizes, double value, const TensorOptions& options) {
  Tensor tensor = allocate(sizes, options.dtype, options.device, options.category,
                           options.pin_memory);
  kernels(options.device).fill(tensor, value);
  return finish(tensor, options);
}

Tensor zeros(const Shape& sizes, const TensorOptions& options) { return full(sizes, 0.0, options); }
Tensor ones(const Shape& sizes, const TensorOptions& options) { return full(sizes, 1.0, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  MG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange(", start, ", ", end, ", ", step, "): the bounds must be finite and step non-zero");
  MG_CHECK((end - start) / step >= 0, "arange(", start, ", ", end, ", ", step,
           "): step has the wrong sign to go from start to end");
  auto count = static_cast<int64_t>(std::ceil((end - start) / step));
  std::vector<double> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = start + static_cast<double>(i) * step;
  Tensor as_double = from_vector(values, {count});
  Tensor result;
  if (options.device.is_cuda()) {
    // NOTE: from pinned memory the copy does not wait for the device (the pinned block is
    // kept from reuse until the copy has run), so an arange inside a training step (a
    // causal mask, positions) does not stall the stream.
    Tensor staged = converted_copy(as_double, options.dtype, Device::cpu()).pin_memory();
    result = converted_copy(staged, options.dtype, options.device, /*non_blocking=*/true);
  } else {
    result = converted_copy(as_double, options.dtype, options.device);
  }
  if (options.pin_memory) result = result.pin_memory();
  return finish(result, options);
}

Tensor arange(double end, const TensorOptions& options) { return arange(0.0, end, 1.0, options); }

void uniform_(const Tensor& tensor, double low, double high, Generator* generator) {
  Generator& source = generator ? *generator : default_generator();
  kernels(tensor.device()).fill_uniform(tensor, low, high, source.reserve(tensor.numel(), tensor.device()));
  tensor.bump_version();
}

void normal_(const Tensor& tensor, double mean, double std, Generator* generator) {
  Generator& source = generator ? *generator : default_generator();
  kernels(tensor.device()).fill_normal(tensor, mean, std, source.reserve(tensor.numel(), tensor.device()));
  tensor.bump_version();
}

Tensor rand(const Shape& sizes, const TensorOptions& options, Generator* generator) {
  MG_CHECK(is_floating(options.dtype), "rand: expected a floating dtype, got ", options.dtype);
  Tensor tensor = allocate(sizes, options.dtype, options.device, options.category,
                           options.pin_memory);
  uniform_(tensor, 0.0, 1.0, generator);
  return finish(tensor, options);
}

Tensor randn(const Shape& sizes, const TensorOptions& options, Generator* generator) {
  MG_CHECK(is_floating(options.dtype), "randn: expected a floating dtype, got ", options.dtype);
  Tensor tensor = allocate(sizes, options.dtype, options.device, options.category,
                           options.pin_memory);
  normal_(tensor, 0.0, 1.0, generator);
  return finish(tensor, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, const TensorOptions& options,
               Generator* generator) {
  MG_CHECK(low < high, "randint: low (", low, ") must be below high (", high, ")");
  // Uniform doubles in [low, high) floored: exact for ranges far below 2^53.
  Tensor values = allocate(sizes, DType::Float64, options.device, MemoryCategory::Temporary);
  uniform_(values, static_cast<double>(low), static_cast<double>(high), generator);
  Tensor result = allocate(sizes, options.dtype, options.device, options.category,
                           options.pin_memory);
  kernels(options.device).copy(values, result);  // conversion to an integer type truncates
  return finish(result, options);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, const TensorOptions& options) {
  Shape shape = sizes.empty() ? Shape{static_cast<int64_t>(values.size())} : sizes;
  MG_CHECK(shape.numel() == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
           " values do not fill shape ", shape, " (", shape.numel(), " elements)");
  Tensor host = allocate(shape, dtype_of<T>, Device::cpu(), options.category,
                         options.pin_memory && options.device.is_cpu());
  std::copy(values.begin(), values.end(), static_cast<T*>(host.raw_data()));
  if (options.device.is_cpu()) return finish(host, options);
  Tensor result = allocate(shape, dtype_of<T>, options.device, options.category,
                           options.pin_memory);
  copy_across_devices(host, result);
  return finish(result, options);
}

template Tensor from_vector(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<double>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<Half>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<BFloat16>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, const TensorOptions&);
template Tensor from_vector(const std::vector<bool>&, const Shape&, const TensorOptions&);

Tensor scalar_tensor(double value, const TensorOptions& options) { return full({}, value, options); }

Tensor empty_like(const Tensor& like) {
  return allocate(like.sizes(), like.dtype(), like.device(), MemoryCategory::Temporary);
}
Tensor zeros_like(const Tensor& like) { return full_like(like, 0.0); }
Tensor ones_like(const Tensor& like) { return full_like(like, 1.0); }
Tensor full_like(const Tensor& like, double value) {
  return full(like.sizes(), value, {.dtype = like.dtype(), .device = like.device()});
}

Tensor contiguous_copy(const Tensor& tensor) {
  return converted_copy(tensor, tensor.dtype(), tensor.device());
}

Tensor contiguous_copy(const Tensor& tensor, MemoryFormat format) {
  Tensor result = allocate(tensor.sizes(), tensor.dtype(), tensor.device(), MemoryCategory::Temporary,
                           false, format);
  kernels(tensor.device()).copy(tensor, result);
  return result;
}

Tensor converted_copy(const Tensor& tensor, DType dtype, Device device, bool non_blocking, MemoryFormat format) {
  Tensor result = allocate(tensor.sizes(), dtype, device, MemoryCategory::Temporary, false, format);
  if (device == tensor.device()) {
    kernels(device).copy(tensor, result);
  } else if (dtype == tensor.dtype()) {
    copy_across_devices(tensor, result, non_blocking);
  } else {
    // Convert on the source device, then move: the transfer carries the final bytes.
    // NOTE: a converted host copy is pageable, so the transfer then waits regardless.
    Tensor converted = allocate(tensor.sizes(), dtype, tensor.device(), MemoryCategory::Temporary, false, format);
    kernels(tensor.device()).copy(tensor, converted);
    copy_across_devices(converted, result, non_blocking);
  }
  return result;
}

}  // namespace mg
