// core/factory.h — creating tensors: empty, zeros, ones, full, arange, rand, randn, randint,
// from a std::vector, and the *_like variants.
#pragma once

#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"

namespace mg {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
  // What the bytes are for; most tensors start as TEMPORARY and are re-tagged where the
  // fact becomes known (parameter registration, SavedTensor, ...).
  MemoryCategory category = MemoryCategory::Temporary;
  // CPU tensors only: take the bytes from page-locked (pinned) host memory, from which
  // to(Device::cuda(), /*non_blocking=*/true) copies without waiting. Needs CUDA.
  bool pin_memory = false;
};

Tensor empty(const Shape& sizes, const TensorOptions& options = {});
// Uninitialised, laid out in `format` (ChannelsLast: 4-D sizes, NHWC in memory).
Tensor empty(const Shape& sizes, const TensorOptions& options, MemoryFormat format);
Tensor zeros(const Shape& sizes, const TensorOptions& options = {});
Tensor ones(const Shape& sizes, const TensorOptions& options = {});
Tensor full(const Shape& sizes, double value, const TensorOptions& options = {});
// Values start, start+step, ... below end (1-d).
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& options = {});
Tensor arange(double end, const TensorOptions& options = {});
// Uniform in [0, 1), standard normal, and uniform integers in [low, high) (int64 unless
// options say otherwise), from `generator` (default: the process-wide one).
Tensor rand(const Shape& sizes, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& sizes, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& sizes,
               const TensorOptions& options = {.dtype = DType::Int64},
               Generator* generator = nullptr);
// num_samples category indices (int64) per row of probs (1-D (n) or 2-D (rows, n),
// non-negative weights, not necessarily normalised), as torch.multinomial: with or
// without replacement.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);
// Fills in place from a distribution (used by nn::init).
void uniform_(const Tensor& tensor, double low, double high, Generator* generator = nullptr);
void normal_(const Tensor& tensor, double mean, double std, Generator* generator = nullptr);

// A tensor of `sizes` holding `values` (row-major); options.dtype is ignored: the dtype is
// T's. An empty `sizes` means 1-d of values.size().
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes = {},
                   const TensorOptions& options = {});
Tensor scalar_tensor(double value, const TensorOptions& options = {});

// Same sizes, dtype and device as `like`.
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, double value);

// Non-differentiable conversions used by kernels and autograd internals: a contiguous
// copy, a copy converted to dtype and/or device laid out in `format`. A copy between host
// and device with `non_blocking` does not wait for the transfer when the host side is
// pinned.
Tensor contiguous_copy(const Tensor& tensor);
Tensor contiguous_copy(const Tensor& tensor, MemoryFormat format);
Tensor converted_copy(const Tensor& tensor, DType dtype, Device device, bool non_blocking = false,
                      MemoryFormat format = MemoryFormat::Contiguous);

}  // namespace mg
