// core/allocator/allocator_observer.cpp — the one observer slot every allocator reports to.
#include "memgrad/core/allocator/allocator_observer.h"

#include <atomic>

#include "memgrad/core/error.h"

namespace mg {

namespace {
std::atomic<AllocatorObserver*> installed_observer{nullptr};
std::atomic<uint64_t> installations{0};
}  // namespace

AllocatorObserver* allocator_observer() { return installed_observer.load(std::memory_order_acquire); }

uint64_t allocator_observer_installation() { return installations.load(std::memory_order_acquire); }

void set_allocator_observer(AllocatorObserver* observer) {
  if (observer == nullptr) {
    installed_observer.store(nullptr, std::memory_order_release);
    return;
  }
  AllocatorObserver* expected = nullptr;
  // NOTE: the count rises before the observer shows, so an allocator that sees the new
  // observer also sees that it owes it its segments.
  installations.fetch_add(1, std::memory_order_acq_rel);
  MG_CHECK(installed_observer.compare_exchange_strong(expected, observer, std::memory_order_acq_rel) ||
               expected == observer,
           "set_allocator_observer: another observer already listens to the allocators. Hint: one "
           "memory::Recorder runs at a time; stop() the running one first.");
}

}  // namespace mg
