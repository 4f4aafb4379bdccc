// memory/memory_cap.h — capping what memgrad may reserve on a device, as PyTorch's
// torch.cuda.set_per_process_memory_fraction does: to share a GPU with another process, to
// run as if on a smaller device, or to test out-of-memory handling on real memory (the CPU
// too).
//
//   mg::memory::set_memory_cap(mg::Device::cuda(0), 8ull << 30);   // at most 8 GiB reserved
//   mg::memory::remove_memory_cap(mg::Device::cuda(0));
//
// On a GPU the fraction form is mg::cuda::set_memory_fraction (cuda/cuda_allocator_backend.h:
// a share of the device's total memory, applied by the cudaMalloc backend); both may be
// set, and the smaller bound holds. A byte cap works on every device, the CPU included.
//
// The cap counts the caching allocator's reserved bytes (its segments: what
// memory_summary() calls reserved), not the CUDA context, cuBLAS/cuDNN handles or other
// processes. A request that would take a new segment past the cap is met as one the device
// refused: memgrad returns its cached free segments and retries, then throws
// mg::OutOfMemoryError, whose message names the cap. After catching it, free what the
// failed step held (its tensors go out of scope) and carry on: the allocator stays usable.
#pragma once

#include <cstddef>
#include <optional>

#include "memgrad/core/device.h"

namespace mg::memory {

// At most `bytes` reserved on `device` from now on (at least one byte; a cap below what is
// reserved now takes effect as cached segments go back).
void set_memory_cap(Device device, size_t bytes);
// No cap on `device` (the default).
void remove_memory_cap(Device device);
// The cap on `device`, if one is set.
std::optional<size_t> memory_cap(Device device);

}  // namespace mg::memory
