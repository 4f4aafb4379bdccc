// core/memory_category.cpp — names of the memory categories.
#include "memgrad/core/memory_category.h"

namespace mg {

const char* category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Parameter: return "PARAMETER";
    case MemoryCategory::Gradient: return "GRADIENT";
    case MemoryCategory::OptimizerState: return "OPTIMIZER_STATE";
    case MemoryCategory::Activation: return "ACTIVATION";
    case MemoryCategory::Input: return "INPUT";
    case MemoryCategory::Temporary: return "TEMPORARY";
    case MemoryCategory::Workspace: return "WORKSPACE";
    case MemoryCategory::AutocastCache: return "AUTOCAST_CACHE";
    case MemoryCategory::Communication: return "COMMUNICATION";
  }
  return "UNKNOWN";
}

std::optional<MemoryCategory> category_from_name(std::string_view name) {
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    auto category = static_cast<MemoryCategory>(i);
    if (name == category_name(category)) return category;
  }
  return std::nullopt;
}

}  // namespace mg
