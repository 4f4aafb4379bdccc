// core/cpu/total_norm.cpp — the total p-norm of a list of tensors before its root, for
// clip_grad_norm_: the sum of |x|^p over every element of every tensor (max |x| for p = inf).
//
// The reference for cuda/kernels/total_norm.cu. Terms accumulate in double, as the CPU's
// reductions do (core/cpu/reduce.cpp), a chunk of a tensor per task; the chunks' partials
// are then combined in order, so the result does not depend on the number of threads. The
// caller's partials are the CUDA kernel's scratch: the CPU needs none.
#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

enum class NormKind { L1, L2, Max, Power };

constexpr int64_t kChunk = 16384;  // elements per task

// |x|^p, the term a norm adds up (|x| for the max).
template <NormKind kind>
double norm_term(double value, double p) {
  if constexpr (kind == NormKind::L2) return value * value;
  if constexpr (kind == NormKind::Power) return std::pow(std::abs(value), p);
  return std::abs(value);
}

// NaN wins the max, as in PyTorch (a sum carries it anyway).
template <NormKind kind>
double norm_combine(double total, double term) {
  if constexpr (kind == NormKind::Max) return std::isnan(term) || term > total ? term : total;
  return total + term;
}

template <NormKind kind, class T>
double norm_power_of(const T* values, int64_t count, double p) {
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<double> partials(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t end = std::min(count, (chunk + 1) * kChunk);
    double partial = 0;
    for (int64_t i = chunk * kChunk; i < end; ++i) {
      const double value = static_cast<double>(static_cast<compute_t<T>>(values[i]));
      partial = norm_combine<kind>(partial, norm_term<kind>(value, p));
    }
    partials[static_cast<size_t>(chunk)] = partial;
  }
  double total = 0;
  for (double partial : partials) total = norm_combine<kind>(total, partial);
  return total;
}

template <NormKind kind>
double norm_power_over(std::span<const Tensor> tensors, double p) {
  double total = 0;
  for (const Tensor& tensor : tensors) {
    dispatch_floating(tensor.dtype(), "total_norm_power", [&]<class T>() {
      // NOTE: a dense tensor in any layout starts at its first element: its elements are
      // numel() values from there, in some order, which a sum or a max does not mind.
      total = norm_combine<kind>(total, norm_power_of<kind>(static_cast<const T*>(tensor.raw_data()),
                                                            tensor.numel(), p));
    });
  }
  return total;
}

}  // namespace

void total_norm_power(std::span<const Tensor> tensors, double p, const Tensor& partials, const Tensor& result) {
  double total = 0;
  if (std::isinf(p)) {
    total = norm_power_over<NormKind::Max>(tensors, p);
  } else if (p == 1.0) {
    total = norm_power_over<NormKind::L1>(tensors, p);
  } else if (p == 2.0) {
    total = norm_power_over<NormKind::L2>(tensors, p);
  } else {
    total = norm_power_over<NormKind::Power>(tensors, p);
  }
  if (result.dtype() == DType::Float64) {
    *result.data_ptr<double>() = total;
  } else {
    *result.data_ptr<float>() = static_cast<float>(total);
  }
}

}  // namespace mg::cpu
