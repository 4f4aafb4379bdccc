// core/allocator/host_backend.cpp — aligned host memory with an optional cap.
#include "memgrad/core/allocator/host_backend.h"

#include <cstdlib>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/error.h"

namespace mg {

namespace {

// std::aligned_alloc wants a size that is a multiple of the alignment.
size_t round_to_alignment(size_t bytes) {
  return (bytes + HostBackend::kAlignment - 1) / HostBackend::kAlignment * HostBackend::kAlignment;
}

}  // namespace

void* HostBackend::allocate(size_t bytes) {
  const size_t rounded = round_to_alignment(bytes);
  if (rounded < bytes) return nullptr;  // wrapped around: no such memory
  // NOTE: the check and the add are not one atomic step; only the allocator's mutex holder
  // allocates, so no two threads race here.
  if (capacity_bytes_ != 0 && used_bytes() + rounded > capacity_bytes_) return nullptr;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) return nullptr;
  used_bytes_.fetch_add(rounded, std::memory_order_relaxed);
  return ptr;
}

void HostBackend::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t rounded = round_to_alignment(bytes);
  MG_ASSERT(used_bytes() >= rounded, "host backend frees ", rounded, " bytes but only ",
            used_bytes(), " are in use");
  std::free(ptr);
  used_bytes_.fetch_sub(rounded, std::memory_order_relaxed);
}

std::string HostBackend::describe_memory() const {
  const auto used = static_cast<int64_t>(used_bytes());
  if (capacity_bytes_ == 0) return "host memory (unbounded), used " + format_bytes(used);
  return "host memory: capacity " + format_bytes(static_cast<int64_t>(capacity_bytes_)) +
         ", used " + format_bytes(used);
}

}  // namespace mg
