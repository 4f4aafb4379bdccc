// cuda/kernels/dependent_launch.cuh — launching one of memgrad's kernels before the kernel
// ahead of it on the stream has finished (Hopper's programmatic dependent launch), when
// cuda::set_dependent_launch asks for it.
//
// Between two kernels of a stream the GPU normally waits for the first to finish, then
// launches the second. A kernel launched with launch_dependent may instead be launched as
// soon as every block of the kernel ahead has started (or ended), its blocks taking the SM
// slots the ahead kernel's blocks free; each of its threads first calls
// wait_for_previous_kernel(), which returns once the kernel ahead has finished and its
// writes are visible. Nothing is read or written before that, so the result is that of an
// ordinary launch; only the launch's latency overlaps the ahead kernel's last blocks.
// NOTE: measured on an H200 (2026-12-03, batch norm's passes and reductions and pooling
// launched so): ResNet-18's small kernels gained (3.67 -> 3.57 ms a step at batch 256),
// ResNet-50's did not (b128 16.46 -> 16.39 ms eager but 16.01 -> 16.10 ms as a CUDA graph;
// b256 29.70 -> 29.99 ms). Hence off by default.
//
// The rule for a kernel launched this way: wait_for_previous_kernel() is its first
// statement. (It does nothing under an ordinary launch, so such a kernel may be launched
// either way.) The caching allocator's stream order stays intact: memory freed after the
// kernel ahead is touched only after that kernel has finished, and that kernel itself
// started its work only after the one ahead of it had finished.
#pragma once

#include <utility>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

// Waits until the kernel ahead on the stream has finished and its memory is visible, then
// lets the kernel after this one (if launched with launch_dependent) be launched: every
// block of this kernel has started once all have passed here.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<blocks, threads, shared_bytes, stream>>>(arguments...), launched early where
// set_dependent_launch and `device` allow it (launches_dependent). `kernel` must begin with
// wait_for_previous_kernel().
template <class... Parameters, class... Arguments>
void launch_dependent(void (*kernel)(Parameters...), dim3 blocks, dim3 threads, size_t shared_bytes,
                      cudaStream_t stream, Device device, Arguments&&... arguments) {
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = blocks;
  config.blockDim = threads;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &early;
  config.numAttrs = launches_dependent(device) ? 1 : 0;
  MG_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...));
}

}  // namespace mg::cuda
