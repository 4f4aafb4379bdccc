// core/memory_category.h — what a block of memory is for. Every live allocation carries one
// category, set where the fact is known (parameter registration, gradient accumulation,
// optimizer state creation, SavedTensor, data loader), so memory can be reported by purpose.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mg {

enum class MemoryCategory : uint8_t {
  Parameter,       // nn parameters and buffers
  Gradient,        // .grad of leaves
  OptimizerState,  // momentum, Adam moments, step counters
  Activation,      // tensors saved by autograd for backward
  Input,           // batches from the data loader
  Temporary,       // everything else: intermediate results, outputs not saved
  Workspace,       // scratch space of libraries (cuBLAS, cuDNN)
  AutocastCache,   // 16-bit copies of parameters that autocast keeps for its region
  Communication,   // what data-parallel training holds beyond the gradients themselves:
                   // staging for coalesced collectives (distributed_data_parallel.h says
                   // exactly which bytes; its buckets, being the gradients' storage, are
                   // GRADIENT)
};

inline constexpr int kNumMemoryCategories = 9;

// Upper-case names, as used in reports and JSON: "PARAMETER", "OPTIMIZER_STATE", ...
const char* category_name(MemoryCategory category);
std::optional<MemoryCategory> category_from_name(std::string_view name);

}  // namespace mg
