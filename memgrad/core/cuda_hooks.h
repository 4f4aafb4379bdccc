// core/cuda_hooks.h — the few things core asks of the cuda/ room when memgrad is built
// with CUDA (MG_WITH_CUDA): its kernel table, its allocator backend, the current stream,
// copies between host and device, and the pinned host memory allocator.
//
// NOTE: core cannot include cuda/ (which sits above it), yet core's dispatch must reach the
// CUDA implementations. These functions are therefore declared here and defined in cuda/;
// core calls them only inside `#ifdef MG_WITH_CUDA`, so a CPU-only build never links them.
// (Registration at static-initialisation time was the alternative; a static library drops
// object files nobody references, so registrars would silently vanish.)
#pragma once

#include <memory>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/kernels.h"

namespace mg {
class Tensor;
}

namespace mg::cuda {

const KernelTable& kernel_table();
std::unique_ptr<RawBackend> make_allocator_backend(Device device);
// The allocator's identity of the calling thread's current stream on `device`.
StreamId current_stream_id(Device device);
// Copies between host and device or between devices, on the current stream; waits for
// the copy unless `non_blocking` and the host side is pinned.
void copy_between_devices(const Tensor& source, const Tensor& destination, bool non_blocking);
// The caching allocator of pinned (page-locked) host memory, behind
// TensorOptions::pin_memory and Tensor::pin_memory().
CachingAllocator& pinned_host_allocator();

}  // namespace mg::cuda
