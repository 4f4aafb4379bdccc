// core/allocator/simulated_backend.cpp — bookkeeping of a device without memory.
#include "memgrad/core/allocator/simulated_backend.h"

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/error.h"

namespace mg {

namespace {

size_t round_to_alignment(size_t bytes) {
  return (bytes + SimulatedBackend::kAlignment - 1) / SimulatedBackend::kAlignment *
         SimulatedBackend::kAlignment;
}

}  // namespace

SimulatedBackend::SimulatedBackend(size_t capacity_bytes, SegmentPlacement placement)
    : capacity_bytes_(capacity_bytes), placement_(placement) {
  MG_CHECK(capacity_bytes > 0, "a simulated device needs a capacity above 0 bytes. Hint: "
           "give it the memory of the GPU you want to model, e.g. 80 GiB.");
}

void* SimulatedBackend::allocate(size_t bytes) {
  const size_t rounded = round_to_alignment(bytes);
  if (rounded < bytes || rounded > capacity_bytes_ - used_bytes_) return nullptr;
  if (rounded > highest_free_ - lowest_free_) return nullptr;  // the address space is spent
  uintptr_t address = 0;
  if (placement_ == SegmentPlacement::Ascending) {
    address = lowest_free_;
    lowest_free_ += rounded;
  } else {
    highest_free_ -= rounded;
    address = highest_free_;
  }
  used_bytes_ += rounded;
  return reinterpret_cast<void*>(address);
}

void SimulatedBackend::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t rounded = round_to_alignment(bytes);
  MG_ASSERT(used_bytes_ >= rounded, "simulated backend frees ", rounded, " bytes but only ",
            used_bytes_, " are in use");
  used_bytes_ -= rounded;
}

std::string SimulatedBackend::describe_memory() const {
  return "simulated device: capacity " + format_bytes(static_cast<int64_t>(capacity_bytes_)) +
         ", used " + format_bytes(static_cast<int64_t>(used_bytes_));
}

}  // namespace mg
