// core/storage.cpp — allocation, release and category bookkeeping of a storage.
#include "core/storage.h"

#include "core/allocator/registry.h"
#include "core/error.h"

namespace mg {

Storage::Storage(size_t nbytes, Device device, MemoryCategory category)
    : allocator_(&allocator_for(device)),
      allocation_(allocator_->allocate(nbytes, category)),
      nbytes_(nbytes),
      device_(device),
      has_data_(allocator_->backend().has_storage()),
      category_(category) {}

Storage::~Storage() { allocator_->free(allocation_.block); }

void Storage::set_category(MemoryCategory category) {
  if (category == category_) return;
  category_ = category;
  tagged_as_activation_ = false;
  if (allocation_.block) allocator_->set_category(allocation_.block, category);
}

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
