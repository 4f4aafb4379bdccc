// core/simulated_kernels.cpp — a kernel table whose every entry is a no-op, and the choice
// between it and the scratch kernels of the device being simulated.
#include "memgrad/core/simulated_kernels.h"

#include <atomic>

namespace mg {

namespace {

// Read by every simulated kernel call: one atomic load.
std::atomic<const KernelTable*> scratch_kernels{nullptr};

// A function with the given signature that ignores its arguments.
// (One that returns something returns its value-initialised value: false for a bool.)
template <class Signature> struct Ignore;
template <class Result, class... Args>
struct Ignore<Result (*)(Args...)> {
  static Result call(Args...) { return Result(); }
};
template <auto KernelTable::*Member>
constexpr auto ignore = Ignore<std::remove_reference_t<decltype(std::declval<KernelTable>().*Member)>>::call;

}  // namespace

KernelTable no_scratch_kernel_table() {
  return KernelTable{
#define MG_KERNEL(name, result, parameters) .name = ignore<&KernelTable::name>,
#include "memgrad/core/kernel_list.h"
  };
}

const KernelTable& simulated_kernel_table() {
  static const KernelTable no_scratch = no_scratch_kernel_table();
  const KernelTable* installed = scratch_kernels.load(std::memory_order_acquire);
  return installed != nullptr ? *installed : no_scratch;
}

void set_simulated_scratch_kernels(const KernelTable* kernels) {
  scratch_kernels.store(kernels, std::memory_order_release);
}

}  // namespace mg
