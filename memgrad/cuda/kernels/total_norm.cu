// cuda/kernels/total_norm.cu — the total p-norm of a list of tensors before its root, for
// clip_grad_norm_: the sum of |x|^p over every element of every tensor (max |x| for p = inf),
// in a few launches for a whole model and without a host sync.
//
// Each dtype's tensors go through multi_tensor_apply.cuh's launches (1,160 tensors each)
// over a grid capped at the caller's partials: block b walks chunks b, b + grid, ... of its
// launch, each thread accumulating its elements, and the block's total joins partials[b].
// One block then combines the partials into the result. Everything accumulates in the
// result's dtype (float32; float64 when a tensor is float64): a thread sums numel / (blocks
// x 256) terms in a row (some 500 for GPT-2's 124M gradients), the rest is added pairwise
// or nearly so, which keeps float32 within about 1e-6 of the exact sum.
//
// NOTE: deterministic without atomics. The first launch to reach slot b writes it and later
// ones (same stream, so in order) add to it; the combine reads the slots in a fixed order.
// The same list with the same partials gives the same bits every run.
//
// The arithmetic is core/cpu/total_norm.cpp's (which accumulates in double).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/multi_tensor_apply.cuh"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

enum class NormKind { L1, L2, Max, Power };

NormKind norm_kind(double p) {
  if (std::isinf(p)) return NormKind::Max;
  if (p == 1.0) return NormKind::L1;
  if (p == 2.0) return NormKind::L2;
  return NormKind::Power;
}

// |x|^p, the term a norm adds up (|x| for the max).
template <NormKind kind, class Acc>
__device__ __forceinline__ Acc norm_term(Acc value, Acc p) {
  if constexpr (kind == NormKind::L2) return value * value;
  if constexpr (kind == NormKind::Power) return pow(fabs(value), p);
  return fabs(value);
}

// NaN wins the max, as in PyTorch (a sum carries it anyway).
template <NormKind kind, class Acc>
__device__ __forceinline__ Acc norm_combine(Acc total, Acc term) {
  if constexpr (kind == NormKind::Max) return isnan(term) || term > total ? term : total;
  return total + term;
}

template <NormKind kind>
struct NormCombine {
  template <class Acc>
  __device__ __forceinline__ Acc operator()(Acc a, Acc b) const { return norm_combine<kind>(a, b); }
};

// Launched with kThreadsPerBlock threads and at most `partials`' length of blocks; slots
// below `written` already hold an earlier launch's totals.
template <class T, class Acc, NormKind kind>
__global__ void __launch_bounds__(kThreadsPerBlock)
    norm_partials_kernel(TensorLists<1> lists, Acc p, Acc* partials, int32_t written) {
  using C = device_compute_t<T>;
  constexpr int kPerThread = kChunk / kThreadsPerBlock;
  const int32_t chunks = lists.first_block[lists.count];
  Acc total = Acc(0);
  for (int32_t chunk = static_cast<int32_t>(blockIdx.x); chunk < chunks; chunk += static_cast<int32_t>(gridDim.x)) {
    const BlockWork work = chunk_work(lists, chunk);
    const T* values = static_cast<const T*>(lists.data[0][work.tensor]) + work.begin;
    const int64_t count = work.end - work.begin;
    if (count == kChunk) {
      // A full chunk: every load issued before the first is used.
      Acc loaded[kPerThread];
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        loaded[k] = static_cast<Acc>(to_compute<C>(values[threadIdx.x + k * kThreadsPerBlock]));
      }
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) total = norm_combine<kind>(total, norm_term<kind>(loaded[k], p));
    } else {
      for (int64_t i = threadIdx.x; i < count; i += kThreadsPerBlock) {
        total = norm_combine<kind>(total, norm_term<kind>(static_cast<Acc>(to_compute<C>(values[i])), p));
      }
    }
  }
  total = reduce_across_row(total, NormCombine<kind>{});
  if (threadIdx.x == 0) {
    const auto slot = static_cast<int32_t>(blockIdx.x);
    partials[slot] = slot < written ? norm_combine<kind>(partials[slot], total) : total;
  }
}
static_assert(kFitsBesideLists<double, double*, int32_t>, "norm_partials_kernel's arguments must fit one launch");

// One block of kThreadsPerBlock threads: result = the first `count` partials combined.
template <class Acc, NormKind kind>
__global__ void __launch_bounds__(kThreadsPerBlock)
    combine_partials_kernel(const Acc* partials, int32_t count, Acc* result) {
  Acc total = Acc(0);
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < count; i += kThreadsPerBlock) {
    total = norm_combine<kind>(total, partials[i]);
  }
  total = reduce_across_row(total, NormCombine<kind>{});
  if (threadIdx.x == 0) *result = total;
}

template <class Acc, NormKind kind>
void launch_total_norm(std::span<const Tensor> tensors, double p, const Tensor& partials, const Tensor& result) {
  const Device device = result.device();
  const cudaStream_t stream = current_stream(device);
  Acc* partial_data = partials.data_ptr<Acc>();
  const auto max_blocks = static_cast<unsigned>(std::min<int64_t>(partials.numel(), INT32_MAX));
  int32_t written = 0;
  for (const std::vector<Tensor>& group : group_by_dtype(tensors)) {
    launch_multi_tensor<1>("total_norm_power", {group}, /*steps=*/{}, stream,
                           [&]<class T>(const TensorLists<1>& lists, unsigned blocks, cudaStream_t launch_stream) {
                             const unsigned grid = std::min(blocks, max_blocks);
                             norm_partials_kernel<T, Acc, kind><<<grid, kThreadsPerBlock, 0, launch_stream>>>(
                                 lists, static_cast<Acc>(p), partial_data, written);
                             written = std::max(written, static_cast<int32_t>(grid));
                           });
  }
  combine_partials_kernel<Acc, kind><<<1, kThreadsPerBlock, 0, stream>>>(partial_data, written,
                                                                        result.data_ptr<Acc>());
  MG_CUDA_CHECK_LAUNCH();
}

template <class Acc>
void launch_total_norm(std::span<const Tensor> tensors, double p, const Tensor& partials, const Tensor& result) {
  switch (norm_kind(p)) {
    case NormKind::L1: return launch_total_norm<Acc, NormKind::L1>(tensors, p, partials, result);
    case NormKind::L2: return launch_total_norm<Acc, NormKind::L2>(tensors, p, partials, result);
    case NormKind::Max: return launch_total_norm<Acc, NormKind::Max>(tensors, p, partials, result);
    case NormKind::Power: return launch_total_norm<Acc, NormKind::Power>(tensors, p, partials, result);
  }
}

}  // namespace

void total_norm_power(std::span<const Tensor> tensors, double p, const Tensor& partials, const Tensor& result) {
  constexpr const char* kOp = "total_norm_power";
  const Device device = result.device();
  bool any_float64 = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i];
    MG_CHECK(is_floating(tensor.dtype()) && tensor.device() == device &&
                 is_contiguous_in(tensor, suggest_memory_format(tensor)),
             kOp, ": tensor ", i, " must be a dense floating-point tensor on ", device, "; got ", tensor.dtype(),
             " on ", tensor.device(), ", shape ", tensor.sizes(), ", strides ", tensor.strides());
    any_float64 = any_float64 || tensor.dtype() == DType::Float64;
  }
  const DType accumulate = any_float64 ? DType::Float64 : DType::Float32;
  MG_CHECK(result.numel() == 1 && result.dtype() == accumulate, kOp, ": result must be a one-element ", accumulate,
           " tensor; got ", result.sizes(), " ", result.dtype());
  MG_CHECK(partials.dim() == 1 && partials.numel() >= 1 && partials.is_contiguous() && partials.dtype() == accumulate &&
               partials.device() == device,
           kOp, ": partials must be a non-empty contiguous 1-D ", accumulate, " tensor on ", device, "; got ",
           partials.sizes(), " ", partials.dtype(), " on ", partials.device());
  MG_ASSERT(p > 0, kOp, ": p must be > 0, got ", p);
  DeviceGuard guard(device);
  if (any_float64) {
    launch_total_norm<double>(tensors, p, partials, result);
  } else {
    launch_total_norm<float>(tensors, p, partials, result);
  }
}

}  // namespace mg::cuda
