// core/simulated_kernels.cpp — a kernel table whose every entry is a no-op, and the choice
// between it and the scratch kernels of the device being simulated.
#include "memgrad/core/simulated_kernels.h"

#include <atomic>

#include "memgrad/core/linear_gelu_steps.h"

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

thread_local KernelObserver* observer = nullptr;

const KernelTable& installed_or_no_scratch() {
  static const KernelTable no_scratch = no_scratch_kernel_table();
  const KernelTable* installed = scratch_kernels.load(std::memory_order_acquire);
  return installed != nullptr ? *installed : no_scratch;
}

// The entry `Member` of the table in force, its work reported first to this thread's observer.
template <auto KernelTable::*Member, class Signature> struct Observed;
template <auto KernelTable::*Member, class Result, class... Args>
struct Observed<Member, Result (*)(Args...)> {
  static const char* name;
  static Result call(Args... args) {
    if (observer != nullptr) observer->observe(work_of<Member>(name, args...));
    return (installed_or_no_scratch().*Member)(args...);
  }
};
template <auto KernelTable::*Member>
using ObservedEntry = Observed<Member, std::remove_reference_t<decltype(std::declval<KernelTable>().*Member)>>;

#define MG_KERNEL(kernel, result, parameters) \
  template <>                                  \
  const char* ObservedEntry<&KernelTable::kernel>::name = #kernel;
#include "memgrad/core/kernel_list.h"

}  // namespace

KernelTable no_scratch_kernel_table() {
  return KernelTable{
#define MG_KERNEL(name, result, parameters) .name = ignore<&KernelTable::name>,
#include "memgrad/core/kernel_list.h"
  };
}

namespace {

// The MLP's backward as the kernels both devices run for it (the CPU always, CUDA since
// cuBLASLt's DGELU_BGRAD epilogue proved slower: cuda/linear_gelu.cpp), each observed and
// borrowing its own scratch: a costed step pays for the gelu gradient's pass and the column
// sum, not only the product.
void linear_gelu_backward_as_run(const Tensor& grad_output, const Tensor& weight, const Tensor& pre_activation,
                                 bool tanh, const Tensor& grad_pre, const Tensor& grad_bias) {
  linear_gelu_backward_in_steps(simulated_kernel_table(), grad_output, weight, pre_activation, tanh, grad_pre,
                                grad_bias);
}

}  // namespace

const KernelTable& simulated_kernel_table() {
  static const KernelTable observed = [] {
    KernelTable table{
#define MG_KERNEL(name, result, parameters) .name = ObservedEntry<&KernelTable::name>::call,
#include "memgrad/core/kernel_list.h"
    };
    table.linear_gelu_backward = linear_gelu_backward_as_run;
    return table;
  }();
  return observed;
}

KernelObserver* set_simulated_kernel_observer(KernelObserver* replacement) {
  KernelObserver* previous = observer;
  observer = replacement;
  return previous;
}

void set_simulated_scratch_kernels(const KernelTable* kernels) {
  scratch_kernels.store(kernels, std::memory_order_release);
}

}  // namespace mg
