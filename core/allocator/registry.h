// core/allocator/registry.h — one caching allocator per device, created on first use.
//
// The CPU's allocator sits on the host backend; simulated:N on a simulated backend whose
// capacity is set with set_simulated_capacity (default 80 GiB, like a large GPU); CUDA
// devices on the backend the cuda/ room registers (when memgrad is built with CUDA).
#pragma once

#include <functional>
#include <memory>

#include "core/allocator/caching_allocator.h"

namespace mg {

CachingAllocator& allocator_for(Device device);

// Replaces simulated:N's allocator with a fresh one of the given capacity. Any tensor
// still alive on that device must be gone first (checked).
void set_simulated_capacity(int index, size_t capacity_bytes);

// Installed once by the cuda/ room: builds the raw backend for a CUDA device.
using BackendFactory = std::function<std::unique_ptr<RawBackend>(Device)>;
void register_backend_factory(DeviceType type, BackendFactory factory);

}  // namespace mg
