// core/simulated_kernels.h — the simulated device's kernels: they do no arithmetic.
//
// The simulated device exists for its allocator: running a model there performs every
// allocation a real run would (same shapes, same caching, same categories) without any
// arithmetic, which is how memory can be tested without a GPU and peak memory predicted.
// What its kernels allocate depends on the device it stands in for (memory/simulated_target.h):
// by default nothing, under a SimulatedTarget the scratch the target's kernels borrow.
#pragma once

#include "memgrad/core/kernels.h"

namespace mg {

// The table in force: the SimulatedTarget's scratch model, or no_scratch_kernel_table().
const KernelTable& simulated_kernel_table();

// A table whose every entry does nothing: the base each scratch model overrides.
KernelTable no_scratch_kernel_table();

}  // namespace mg
