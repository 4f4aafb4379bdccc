// memory/snapshot.cpp — snapshots of a device's caching-allocator statistics, and the report
// and JSON made from them.
#include "memgrad/memory/snapshot.h"

#include <cstdarg>
#include <cstdio>

#include "memgrad/core/allocator/memory_report.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/io/json.h"
#ifdef MG_WITH_CUDA
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/cuda/cuda.h"
#endif

namespace mg::memory {

namespace {

Snapshot snapshot_of(const MemoryStats& stats, Device device, bool pinned) {
  Snapshot result;
  result.device = device;
  result.pinned = pinned;
  result.allocated_bytes = stats.allocated_bytes.current;
  result.reserved_bytes = stats.reserved_bytes.current;
  result.peak_allocated_bytes = stats.allocated_bytes.peak;
  result.peak_reserved_bytes = stats.reserved_bytes.peak;
  result.requested_bytes = stats.requested_bytes.current;
  result.peak_requested_bytes = stats.requested_bytes.peak;
  result.active_bytes = stats.active_bytes.current;
  result.inactive_split_bytes = stats.inactive_split_bytes.current;
  result.num_allocations = stats.allocation_count.current;
  result.num_segments = stats.segment_count.current;
  result.num_alloc_retries = stats.num_alloc_retries;
  result.num_ooms = stats.num_ooms;
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    result.by_category[index] = {stats.category_bytes[index].current,
                                 stats.category_bytes[index].peak};
  }
  return result;
}

}  // namespace

Snapshot snapshot(Device device) { return snapshot_of(allocator_for(device).stats(), device, /*pinned=*/false); }

Snapshot pinned_host_snapshot() {
#ifdef MG_WITH_CUDA
  // Without a visible GPU nothing can have been pinned: the report is empty, not an error
  // (a CUDA build on a machine without a GPU, as CI's).
  if (cuda::is_available()) return snapshot_of(cuda::pinned_host_allocator().stats(), Device::cpu(), /*pinned=*/true);
#endif
  return snapshot_of(MemoryStats{}, Device::cpu(), /*pinned=*/true);
}

void reset_peak_stats(Device device) { allocator_for(device).reset_peak_stats(); }

namespace {

// "PARAMETER   1.50 KiB   1536   3.00 KiB   3072": readable and exact, current then peak.
void append_bytes_row(std::string& out, const char* label, int64_t current, int64_t peak) {
  append_line(out, "%-22s %12s %16lld %12s %16lld", label, format_bytes(current).c_str(),
              static_cast<long long>(current), format_bytes(peak).c_str(),
              static_cast<long long>(peak));
}

void append_header(std::string& out, const char* title) {
  append_line(out, "%-22s %12s %16s %12s %16s", title, "Current", "bytes", "Peak", "bytes");
  out.append(82, '-');
  out += '\n';
}

}  // namespace

std::string report(Device device) { return report(snapshot(device)); }

std::string report(const Snapshot& snapshot) {
  std::string out;
  append_line(out, "memgrad memory on %s%s", snapshot.device.str().c_str(), snapshot.pinned ? " (pinned)" : "");
  // NOTE: categories count the bytes tensors asked for; the allocator rounds each block up
  // to 512 bytes and keeps freed segments cached, so allocated >= total and reserved >=
  // allocated.
  append_header(out, "Requested by category");
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    const CategoryBytes& bytes = snapshot.by_category[index];
    append_bytes_row(out, category_name(static_cast<MemoryCategory>(index)), bytes.current,
                     bytes.peak);
  }
  append_bytes_row(out, "Total", snapshot.requested_bytes, snapshot.peak_requested_bytes);
  out += '\n';
  append_header(out, "Allocator");
  append_bytes_row(out, "Allocated (rounded)", snapshot.allocated_bytes,
                   snapshot.peak_allocated_bytes);
  append_bytes_row(out, "Reserved (segments)", snapshot.reserved_bytes,
                   snapshot.peak_reserved_bytes);
  append_line(out, "Live blocks: %lld   Segments: %lld   Alloc retries: %lld   OOMs: %lld",
              static_cast<long long>(snapshot.num_allocations),
              static_cast<long long>(snapshot.num_segments),
              static_cast<long long>(snapshot.num_alloc_retries),
              static_cast<long long>(snapshot.num_ooms));
  return out;
}

std::string host_and_device_report(Device device) {
  const Snapshot places[] = {snapshot(device), snapshot(Device::cpu()), pinned_host_snapshot()};
  const bool device_is_host = device.is_cpu();
  std::string out;
  append_line(out, "memgrad memory by place: requested bytes, current (peak)");
  append_line(out, "%-16s %28s %28s %28s", "", device_is_host ? "-" : device.str().c_str(), "host (pageable)",
              "host (pinned)");
  out.append(102, '-');
  out += '\n';
  auto cell = [](const CategoryBytes& bytes) {
    return format_bytes(bytes.current) + " (" + format_bytes(bytes.peak) + ")";
  };
  for (int index = 0; index < kNumMemoryCategories + 1; ++index) {
    const bool total = index == kNumMemoryCategories;
    std::string cells[3];
    for (int place = 0; place < 3; ++place) {
      const Snapshot& at = places[place];
      const CategoryBytes bytes =
          total ? CategoryBytes{at.requested_bytes, at.peak_requested_bytes} : at.by_category[index];
      cells[place] = place == 0 && device_is_host ? "-" : cell(bytes);
    }
    append_line(out, "%-16s %28s %28s %28s", total ? "Total" : category_name(static_cast<MemoryCategory>(index)),
                cells[0].c_str(), cells[1].c_str(), cells[2].c_str());
  }
  return out;
}

std::string to_json(const Snapshot& snapshot) {
  JsonWriter json;
  write_json(json, snapshot);
  return json.str();
}

void write_json(JsonWriter& json, const Snapshot& snapshot) {
  json.begin_object();
  json.key("device").value(snapshot.device.str());
  if (snapshot.pinned) json.key("pinned").value(true);
  json.key("allocated_bytes").value(snapshot.allocated_bytes);
  json.key("reserved_bytes").value(snapshot.reserved_bytes);
  json.key("peak_allocated_bytes").value(snapshot.peak_allocated_bytes);
  json.key("peak_reserved_bytes").value(snapshot.peak_reserved_bytes);
  json.key("requested_bytes").value(snapshot.requested_bytes);
  json.key("peak_requested_bytes").value(snapshot.peak_requested_bytes);
  json.key("active_bytes").value(snapshot.active_bytes);
  json.key("inactive_split_bytes").value(snapshot.inactive_split_bytes);
  json.key("num_allocations").value(snapshot.num_allocations);
  json.key("num_segments").value(snapshot.num_segments);
  json.key("num_alloc_retries").value(snapshot.num_alloc_retries);
  json.key("num_ooms").value(snapshot.num_ooms);
  json.key("bytes_by_category").begin_object();
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    json.key(category_name(static_cast<MemoryCategory>(index)))
        .value(snapshot.by_category[index].current);
  }
  json.end_object();
  json.key("peak_bytes_by_category").begin_object();
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    json.key(category_name(static_cast<MemoryCategory>(index)))
        .value(snapshot.by_category[index].peak);
  }
  json.end_object();
  json.end_object();
}

}  // namespace mg::memory
