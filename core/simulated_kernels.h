// core/simulated_kernels.h — the simulated device's kernels: they do nothing.
//
// The simulated device exists for its allocator: running a model there performs every
// allocation a real run would (same shapes, same caching, same categories) without any
// arithmetic, which is how memory can be tested without a GPU and peak memory predicted.
#pragma once

#include "core/kernels.h"

namespace mg {

const KernelTable& simulated_kernel_table();

}  // namespace mg
