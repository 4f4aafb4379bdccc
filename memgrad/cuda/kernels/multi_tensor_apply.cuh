// cuda/kernels/multi_tensor_apply.cuh — many tensors per launch, in the manner of PyTorch's
// multi_tensor_apply: the plumbing shared by the fused optimizers (optimizer.cu), the
// GradScaler's unscale (amp.cu) and the total norm of clip_grad_norm_ (total_norm.cu), which
// add only their per-element work and their kernel.
//
// Work layout: a launch covers up to kTensorsPerLaunch<kLists> tensors, each cut into
// chunks of kChunk elements, one block per chunk (or, in a capped grid, each block loops
// over several). The tensors' pointers, sizes and first blocks travel in the kernel's
// argument (a struct of arrays); a block finds its tensor by a binary search of
// first_block (block_work, chunk_work).
//
// NOTE: since CUDA 12.1, kernels built for Volta (sm_70) or later take up to 32,764 bytes
// of arguments (4,096 before), so one launch holds some 540 tensors of Adam's five lists
// rather than 48: every parameter group of a GPT-2 (50 to 100 tensors) is one launch. The
// capacity is derived from that limit, and a static_assert in launch_multi_tensor (and one
// beside each kernel for its other arguments) keeps every argument list inside it; nvcc
// refuses a kernel whose arguments overflow, and a build for an older architecture.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

inline constexpr int64_t kChunk = 4096;  // elements per block: 16 per thread

// The most bytes of arguments a kernel may take (CUDA 12.1+, sm_70+).
inline constexpr size_t kKernelArgumentBytes = 32764;
// What a multi-tensor kernel may take besides its TensorLists: its constants and flags.
inline constexpr size_t kOtherArgumentBytes = 256;

// How many tensors of kLists lists fit one launch: per tensor, kLists data pointers, a
// step pointer, a numel and a first block; per launch, one more first block and the count.
template <int kLists>
inline constexpr int kTensorsPerLaunch = static_cast<int>(
    (kKernelArgumentBytes - kOtherArgumentBytes - 2 * sizeof(int32_t)) /
    (kLists * sizeof(void*) + sizeof(float*) + sizeof(int64_t) + sizeof(int32_t)));

// Pointers of up to kTensorsPerLaunch tensors: kLists per tensor (param, grad, states...).
template <int kLists>
struct TensorLists {
  static constexpr int kCapacity = kTensorsPerLaunch<kLists>;
  void* data[kLists][kCapacity];       // null where an optional list is empty
  const float* step[kCapacity];        // null for work without a step counter
  int64_t numel[kCapacity];
  int32_t first_block[kCapacity + 1];  // blocks [first_block[t], first_block[t + 1]) are tensor t's
  int count;
};

// Whether a kernel whose other arguments are `Others` may take a TensorLists beside them.
template <class... Others>
inline constexpr bool kFitsBesideLists = (sizeof(Others) + ... + 0) <= kOtherArgumentBytes;

// The tensor of this block and the element range of its chunk.
struct BlockWork {
  int tensor;
  int64_t begin;
  int64_t end;
};

// The tensor and element range of chunk `block` of a launch: a kernel whose blocks each
// loop over several chunks (a capped grid) asks for each in turn.
template <int kLists>
__device__ __forceinline__ BlockWork chunk_work(const TensorLists<kLists>& lists, int32_t block) {
  // The last tensor whose first block is at most this one. first_block rises strictly
  // (empty tensors are left out) and first_block[0] is 0, so the answer is in [low, high].
  int low = 0;
  int high = lists.count - 1;
  while (low < high) {
    int middle = (low + high + 1) / 2;
    if (lists.first_block[middle] <= block) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  int64_t begin = static_cast<int64_t>(block - lists.first_block[low]) * kChunk;
  return {low, begin, std::min(begin + kChunk, lists.numel[low])};
}

template <int kLists>
__device__ __forceinline__ BlockWork block_work(const TensorLists<kLists>& lists) {
  return chunk_work(lists, static_cast<int32_t>(blockIdx.x));
}

// `tensors` split by dtype (groups in order of first appearance, each in the list's
// order): a launch serves one dtype, so an entry taking mixed lists launches per group.
inline std::vector<std::vector<Tensor>> group_by_dtype(std::span<const Tensor> tensors) {
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& tensor : tensors) {
    auto same_dtype = [&](const std::vector<Tensor>& group) { return group[0].dtype() == tensor.dtype(); };
    auto group = std::find_if(groups.begin(), groups.end(), same_dtype);
    if (group == groups.end()) group = groups.emplace(groups.end());
    group->push_back(tensor);
  }
  return groups;
}

// Checks the lists of one call: lists[0] holds the leading tensors (an optimizer's
// parameters); each other list is as long (or empty: `optional` says which may be) with,
// per leading tensor, one dense in its layout and of its dtype, device and numel; every
// leading tensor shares one dtype and device; `steps` is empty for work without counters,
// else one float32 counter per leading tensor.
template <int kLists>
void check_lists(const char* op, const std::array<std::span<const Tensor>, kLists>& lists,
                 const std::array<bool, kLists>& optional, std::span<const Tensor> steps, bool needs_steps) {
  std::span<const Tensor> params = lists[0];
  for (int k = 1; k < kLists; ++k) {
    MG_CHECK(lists[k].size() == params.size() || (optional[k] && lists[k].empty()), op, ": got ", params.size(),
             " parameters but a list of ", lists[k].size(), " tensors");
  }
  MG_CHECK(steps.size() == (needs_steps ? params.size() : 0), op, ": got ", params.size(), " parameters but ",
           steps.size(), " step counters");
  for (size_t i = 0; i < params.size(); ++i) {
    MG_CHECK(params[i].dtype() == params[0].dtype() && params[i].device() == params[0].device(), op,
             ": every parameter must share one dtype and device; parameter ", i, " is ", params[i].dtype(), " on ",
             params[i].device(), ", parameter 0 is ", params[0].dtype(), " on ", params[0].device());
    // The kernels walk each tensor as one flat array, so all of a parameter's tensors must be
    // dense in one layout: row-major, or channels_last after Module::to(ChannelsLast).
    const MemoryFormat layout = suggest_memory_format(params[i]);
    for (std::span<const Tensor> list : lists) {
      if (list.empty()) continue;
      MG_CHECK(list[i].numel() == params[i].numel() && list[i].dtype() == params[i].dtype() &&
                   list[i].device() == params[i].device() && is_contiguous_in(list[i], layout),
               op, ": the tensors of parameter ", i, " must be dense in its layout (", layout, "), of its dtype (",
               params[i].dtype(), "), device and ", params[i].numel(), " elements; got shape ", list[i].sizes(),
               " with strides ", list[i].strides());
    }
    if (needs_steps) {
      MG_CHECK(steps[i].numel() == 1 && steps[i].dtype() == DType::Float32 && steps[i].device() == params[i].device(),
               op, ": step ", i, " must be a one-element float32 tensor on ", params[i].device());
    }
  }
}

// Packs the checked `lists` (and `steps`, which may be empty) into groups of up to
// kTensorsPerLaunch<kLists> non-empty tensors and calls launch.template operator()<T>(packed,
// blocks, stream) for each, T the leading tensors' device element type. Empty tensors are
// skipped. The caller has set the device (DeviceGuard).
template <int kLists, class Launch>
void launch_multi_tensor(const char* op, const std::array<std::span<const Tensor>, kLists>& lists,
                         std::span<const Tensor> steps, cudaStream_t stream, Launch launch) {
  static_assert(sizeof(TensorLists<kLists>) + kOtherArgumentBytes <= kKernelArgumentBytes,
                "a multi-tensor kernel's arguments must fit CUDA's 32,764-byte limit");
  std::span<const Tensor> params = lists[0];
  dispatch_floating(params[0].dtype(), op, [&]<class HostT>() {
    TensorLists<kLists> packed;
    packed.count = 0;
    int64_t blocks = 0;
    auto flush = [&] {
      if (packed.count == 0) return;
      packed.first_block[packed.count] = static_cast<int32_t>(blocks);
      launch.template operator()<device_t<HostT>>(packed, static_cast<unsigned>(blocks), stream);
      MG_CUDA_CHECK_LAUNCH();
      packed.count = 0;
      blocks = 0;
    };
    for (size_t i = 0; i < params.size(); ++i) {
      int64_t numel = params[i].numel();
      if (numel == 0) continue;
      int slot = packed.count;
      for (int k = 0; k < kLists; ++k) {
        packed.data[k][slot] = lists[k].empty() ? nullptr : lists[k][i].raw_data();
      }
      packed.step[slot] = steps.empty() ? nullptr : steps[i].data_ptr<float>();
      packed.numel[slot] = numel;
      packed.first_block[slot] = static_cast<int32_t>(blocks);
      blocks += (numel + kChunk - 1) / kChunk;
      MG_ASSERT(blocks <= INT32_MAX, op, ": too many blocks for one launch");
      ++packed.count;
      if (packed.count == TensorLists<kLists>::kCapacity) flush();
    }
    flush();
  });
}

}  // namespace mg::cuda
