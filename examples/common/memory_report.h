// examples/common/memory_report.h — the memory part of a training program's end: what each
// category means (one legend for every program, each naming what its own PARAMETER,
// OPTIMIZER_STATE and INPUT hold), this process's report, and in a data-parallel run every
// rank's peaks by category, which rank 0 prints and writes into --summary-json.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>

namespace examples {

// What a program's own categories hold ("weights and biases", "SGD's momentum buffers",
// "dataset and batches"); the other categories are described the same in every program.
struct CategoryMeanings {
  std::string parameter;
  std::string optimizer_state;
  std::string input;
};

// "Memory on cpu by category: PARAMETER = ..., ..., COMMUNICATION = ..." then the
// allocator's report of `device` (memory::report), to `out`.
void print_memory_report(std::FILE* out, mg::Device device, const CategoryMeanings& meanings);

// A table of each rank's peak allocated and reserved bytes and peak bytes per category
// (DistributedRun::peaks_by_rank's), to `out`.
void print_peaks_by_rank(std::FILE* out, const std::vector<mg::memory::Snapshot>& peaks);

// "memory_per_rank": [{"rank": 0, "peak_allocated_bytes": ..., "peak_reserved_bytes": ...,
// "peak_bytes_by_category": {...}}, ...], as a member of an open JSON object.
void write_peaks_by_rank(mg::JsonWriter& json, const std::vector<mg::memory::Snapshot>& peaks);

}  // namespace examples
