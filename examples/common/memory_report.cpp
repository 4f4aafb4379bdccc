// examples/common/memory_report.cpp — the category legend, and every rank's peaks.
#include "examples/common/memory_report.h"

#include <memgrad/core/memory_category.h>

namespace examples {
namespace {

using mg::MemoryCategory;

std::string meaning(MemoryCategory category, const CategoryMeanings& meanings) {
  switch (category) {
    case MemoryCategory::Parameter: return meanings.parameter;
    case MemoryCategory::Gradient: return "their .grad (in a data-parallel run, DDP's buckets)";
    case MemoryCategory::OptimizerState: return meanings.optimizer_state;
    case MemoryCategory::Activation: return "tensors saved for backward";
    case MemoryCategory::Input: return meanings.input;
    case MemoryCategory::Temporary: return "intermediate results";
    case MemoryCategory::Workspace: return "library scratch space";
    case MemoryCategory::AutocastCache: return "16-bit copies of weights under autocast";
    case MemoryCategory::Communication: return "data-parallel staging (DDP's broadcasts)";
  }
  return "";
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

void print_memory_report(std::FILE* out, mg::Device device, const CategoryMeanings& meanings) {
  std::string legend;
  for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
    const auto category = static_cast<MemoryCategory>(index);
    legend += (index == 0 ? "" : ", ") + std::string(mg::category_name(category)) + " = " + meaning(category, meanings);
  }
  std::fprintf(out, "\nMemory on %s by category: %s.\n%s\n", device.str().c_str(), legend.c_str(),
               mg::memory::report(device).c_str());
  // What a GPU run kept in pinned host memory (an offloaded optimizer, SaveOnCpu): each
  // category's bytes by place.
  if (device.is_cuda() && mg::memory::pinned_host_snapshot().peak_requested_bytes > 0) {
    std::fprintf(out, "%s\n", mg::memory::host_and_device_report(device).c_str());
  }
}

void print_peaks_by_rank(std::FILE* out, const std::vector<mg::memory::Snapshot>& peaks) {
  std::fprintf(out, "Peak MiB per rank: allocated, reserved, then by category\n%-5s %10s %10s", "rank", "allocated",
               "reserved");
  for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
    std::fprintf(out, " %s", mg::category_name(static_cast<MemoryCategory>(index)));
  }
  std::fprintf(out, "\n");
  for (size_t rank = 0; rank < peaks.size(); ++rank) {
    std::fprintf(out, "%-5zu %10.2f %10.2f", rank, mib(peaks[rank].peak_allocated_bytes),
                 mib(peaks[rank].peak_reserved_bytes));
    for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
      // Each figure right-aligned under its category's name.
      const int width = static_cast<int>(std::string(mg::category_name(static_cast<MemoryCategory>(index))).size());
      std::fprintf(out, " %*.2f", width, mib(peaks[rank].by_category[index].peak));
    }
    std::fprintf(out, "\n");
  }
}

void write_peaks_by_rank(mg::JsonWriter& json, const std::vector<mg::memory::Snapshot>& peaks) {
  json.key("memory_per_rank").begin_array();
  for (size_t rank = 0; rank < peaks.size(); ++rank) {
    json.begin_object()
        .key("rank").value(static_cast<int64_t>(rank))
        .key("peak_allocated_bytes").value(peaks[rank].peak_allocated_bytes)
        .key("peak_reserved_bytes").value(peaks[rank].peak_reserved_bytes)
        .key("peak_bytes_by_category").begin_object();
    for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
      json.key(mg::category_name(static_cast<MemoryCategory>(index))).value(peaks[rank].by_category[index].peak);
    }
    json.end_object().end_object();
  }
  json.end_array();
}

}  // namespace examples
