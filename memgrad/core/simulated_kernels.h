// core/simulated_kernels.h — the simulated device's kernels: they do no arithmetic.
//
// The simulated device exists for its allocator: running a model there performs every
// allocation a real run would (same shapes, same caching, same categories) without any
// arithmetic, which is how memory can be tested without a GPU and peak memory predicted.
// What its kernels allocate depends on the device it stands in for (memory/simulated_target.h):
// by default nothing, under a SimulatedTarget the scratch the target's kernels borrow.
//
// Every simulated kernel call can also report its work (core/kernel_work.h) to an observer,
// which is how a step run there is costed (memory/step_cost.h).
#pragma once

#include "memgrad/core/kernel_work.h"
#include "memgrad/core/kernels.h"

namespace mg {

// The table in force: the one set_simulated_scratch_kernels() installed, or
// no_scratch_kernel_table().
const KernelTable& simulated_kernel_table();

// Makes the simulated kernels borrow what `kernels` borrow (a memory::SimulatedTarget
// installs its scratch model's table; it must outlive the installation), or, with nullptr,
// nothing again. NOTE: core sits below memory/, so the model is handed down at run time.
void set_simulated_scratch_kernels(const KernelTable* kernels);

// A table whose every entry does nothing: the base each scratch model overrides.
KernelTable no_scratch_kernel_table();

// Receives the work of every simulated kernel call on the thread that set it.
class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  virtual void observe(const KernelWork& work) = 0;
};
// Makes `observer` (nullptr: none) see this thread's simulated kernel calls; returns the one
// it replaces. It must outlive its installation.
KernelObserver* set_simulated_kernel_observer(KernelObserver* observer);

}  // namespace mg
