// cuda/cuda.h — what any program may ask about the GPU, in every build of memgrad: whether
// CUDA can be used, how many devices there are, waiting for them, the TF32 switch, the
// dependent-launch switch and a profiler's capture range.
//
//   mg::Device device = mg::cuda::is_available() ? mg::Device::cuda() : mg::Device::cpu();
//
// A build without CUDA answers as a machine without a GPU would (device_count() is 0), so
// one program builds and runs with either build, as with torch::cuda::is_available(). The
// CUDA runtime's own tools (streams, events, device guards) are in cuda/runtime.h, which
// includes the toolkit's headers and is therefore internal to CUDA builds.
#pragma once

#include "memgrad/core/device.h"

namespace mg::cuda {

// CUDA devices visible to this process; 0 when memgrad was built without CUDA, or there
// is no driver or no device. Never throws. Counted once per process, like PyTorch's.
int device_count();
bool is_available();

// Waits until every stream of `device` has finished its work. Throws mg::Error in a build
// without CUDA.
void synchronize(Device device = Device::cuda());

// Whether float32 matmuls may use TF32 tensor cores (about 10 mantissa bits instead of 23,
// several times faster). Off by default, as in PyTorch; process-wide. (Kept, and without
// effect, in a build without CUDA.)
void set_allow_tf32(bool allow);
bool allow_tf32();

// Whether memgrad's batch norm passes and reductions and its pooling kernels are launched
// before the kernel ahead of them on the stream has finished, on GPUs that can (compute
// capability 9.0 and up: programmatic dependent launch). Each such kernel waits, before
// touching memory, until the one ahead has finished and its writes are visible, so results
// are the same either way; what changes is how the launches' latency overlaps the kernels.
// Measured on an H200 (2026-12-03, fp16 channels_last): ResNet-18 b256 2.5% faster, while
// ResNet-50 b128 gained 0.4% eager and lost 0.6% as a CUDA graph, and b256 lost 1%. Off by
// default; process-wide. (Kept, and without effect, in a build without CUDA.)
void set_dependent_launch(bool allow);
bool dependent_launch();

// The span a profiler started with its capture off records (cudaProfilerStart and
// cudaProfilerStop: `ncu --profile-from-start off`, `nsys --capture-range=cudaProfilerApi`),
// for a scope: the step benchmarks hold one over their timed steps, so a profile leaves out
// warm-up and setup (bench/kernel_profile.py --timed-steps-only). Without a profiler, or in a
// build without CUDA, it does nothing.
class ProfilerRange {
 public:
  ProfilerRange();
  ~ProfilerRange();
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;
};

}  // namespace mg::cuda
