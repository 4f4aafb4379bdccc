// core/storage.cpp — allocation, release and category bookkeeping of a storage.
#include "memgrad/core/storage.h"

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"

namespace mg {

namespace {

// The stream new bytes belong to: on CUDA the calling thread's current stream, so the
// allocator reuses them only on the stream whose work is ordered after their last use.
StreamId allocation_stream(Device device) {
#ifdef MG_WITH_CUDA
  if (device.is_cuda()) return cuda::current_stream_id(device);
#endif
  return 0;
}

}  // namespace

Storage::Storage(size_t nbytes, Device device, MemoryCategory category)
    : Storage(nbytes, allocator_for(device), category, allocation_stream(device)) {}

Storage::Storage(size_t nbytes, CachingAllocator& allocator, MemoryCategory category,
                 StreamId stream)
    : allocator_(&allocator),
      allocation_(allocator.allocate(nbytes, category, stream)),
      nbytes_(nbytes),
      device_(allocator.device()),
      has_data_(allocator.backend().has_storage()),
      pinned_(allocator.backend().is_pinned()),
      category_(category) {}

Storage::~Storage() { allocator_->free(allocation_.block); }

void Storage::set_category(MemoryCategory category) {
  if (category == category_) return;
  category_ = category;
  tagged_as_activation_ = false;
  if (allocation_.block) allocator_->set_category(allocation_.block, category);
}

void Storage::record_stream(StreamId stream) { allocator_->record_stream(allocation_.block, stream); }

void Storage::add_activation_reference() {
  if (activation_references_++ == 0 && category_ == MemoryCategory::Temporary) {
    set_category(MemoryCategory::Activation);
    tagged_as_activation_ = true;
  }
}

void Storage::remove_activation_reference() {
  MG_ASSERT(activation_references_ > 0, "activation reference count underflow");
  if (--activation_references_ == 0 && tagged_as_activation_) {
    set_category(MemoryCategory::Temporary);
  }
}

}  // namespace mg
