// cuda/transfer.h — moving bytes between host and device and between devices, and telling
// the allocator about tensors used on other streams.
//
// copy_between_devices (declared in core/cuda_hooks.h, called by core's
// copy_across_devices) copies on the current stream of the CUDA side. From or to pageable
// host memory, or without non_blocking, it waits for the copy before returning, so the
// host bytes may be reused or read at once. With non_blocking and a pinned host side it
// returns while the copy runs: read a pinned destination only after synchronising the
// stream; a pinned block is not handed out again until the copy is done (the copy's
// stream is recorded on it).
#pragma once

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

// Notes that work enqueued on `stream` uses `tensor`'s memory, so that when the tensor's
// storage dies the allocator does not hand the memory out again before that work is done
// (PyTorch's Tensor.record_stream). Needed when a tensor made on one stream is used on
// another (e.g. a side stream prefetching data). The tensor must be on the stream's
// device, or in pinned host memory.
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace mg::cuda
