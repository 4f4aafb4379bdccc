// core/allocator/registry.h — one caching allocator per device, created on first use.
//
// The CPU's allocator sits on the host backend; simulated:N on a simulated backend whose
// capacity is set with set_simulated_capacity (default 80 GiB, like a large GPU); CUDA
// devices on the cudaMalloc backend of the cuda/ room (when memgrad is built with CUDA).
#pragma once

#include <memory>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/simulated_backend.h"

namespace mg {

CachingAllocator& allocator_for(Device device);

// Caching::Off when the environment sets MG_NO_MEMORY_CACHING (to anything but "0"): then
// the CPU's and the CUDA devices' allocators, pinned host memory's too, hand every request
// to the backend and give it back at free, so that compute-sanitizer and AddressSanitizer
// see each tensor's bounds (scripts/gpu-sanitize sets it). Simulated devices always cache:
// they exist to model the caching. Read when an allocator is created.
CachingAllocator::Caching caching_from_environment();

// Replaces simulated:N's allocator with a fresh one of the given capacity, placing its
// segments as `placement` says. Any tensor still alive on that device must be gone first
// (checked).
void set_simulated_capacity(int index, size_t capacity_bytes,
                            SegmentPlacement placement = SegmentPlacement::Ascending);

}  // namespace mg
