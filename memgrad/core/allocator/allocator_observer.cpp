// core/allocator/allocator_observer.cpp — the one observer slot every allocator reports to.
#include "memgrad/core/allocator/allocator_observer.h"

#include <atomic>

#include "memgrad/core/error.h"

namespace mg {

namespace {
std::atomic<AllocatorObserver*> installed_observer{nullptr};
}  // namespace

AllocatorObserver* allocator_observer() { return installed_observer.load(std::memory_order_acquire); }

void set_allocator_observer(AllocatorObserver* observer) {
  if (observer == nullptr) {
    installed_observer.store(nullptr, std::memory_order_release);
    return;
  }
  AllocatorObserver* expected = nullptr;
  MG_CHECK(installed_observer.compare_exchange_strong(expected, observer, std::memory_order_acq_rel) ||
               expected == observer,
           "set_allocator_observer: another observer already listens to the allocators. Hint: one "
           "memory::Recorder runs at a time; stop() the running one first.");
}

}  // namespace mg
