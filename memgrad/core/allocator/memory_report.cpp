// core/allocator/memory_report.cpp — format_bytes, the out-of-memory explanation and the
// memory_summary() table (laid out like torch.cuda.memory_summary()).
#include "memgrad/core/allocator/memory_report.h"

#include <cstdarg>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "memgrad/core/allocator/caching_allocator.h"

namespace mg {

std::string format_bytes(int64_t bytes) {
  // NOTE: the magnitude is taken as unsigned so that INT64_MIN does not overflow.
  const bool negative = bytes < 0;
  const uint64_t magnitude = negative ? uint64_t{0} - static_cast<uint64_t>(bytes)
                                      : static_cast<uint64_t>(bytes);
  const char* sign = negative ? "-" : "";
  char text[64];
  if (magnitude < 1024) {
    std::snprintf(text, sizeof text, "%s%llu B", sign, static_cast<unsigned long long>(magnitude));
    return text;
  }
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(magnitude) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024.0;
    ++unit;
  }
  std::snprintf(text, sizeof text, "%s%.2f %s", sign, value, kUnits[unit]);
  return text;
}

namespace {

std::string bytes_with_count(size_t bytes) {
  return format_bytes(static_cast<int64_t>(bytes)) + " (" + std::to_string(bytes) + " bytes)";
}

}  // namespace

std::string out_of_memory_message(Device device, const RawBackend& backend,
                                  const MemoryStats& stats, size_t requested_bytes,
                                  size_t rounded_bytes, size_t segment_bytes, size_t reserved_limit) {
  const int64_t allocated = stats.allocated_bytes.current;
  const int64_t reserved = stats.reserved_bytes.current;
  const int64_t unallocated = reserved - allocated;
  std::ostringstream out;
  out << device << " out of memory: tried to allocate " << bytes_with_count(requested_bytes)
      << ", rounded to " << format_bytes(static_cast<int64_t>(rounded_bytes))
      << ", which needed a new segment of " << format_bytes(static_cast<int64_t>(segment_bytes))
      << " that the device could not supply even after memgrad returned its cached free "
         "segments.\n";
  out << "Device memory: " << backend.describe_memory() << ".\n";
  if (reserved_limit != SIZE_MAX) {
    out << "memgrad may reserve at most " << format_bytes(static_cast<int64_t>(reserved_limit))
        << " on this device (the cap set with mg::memory::set_memory_cap).\n";
  }
  out << "memgrad holds " << format_bytes(reserved) << " reserved in segments, of which "
      << format_bytes(allocated) << " is allocated to tensors (" << format_bytes(unallocated)
      << " reserved but unallocated).\n";

  out << "Requested bytes by category:";
  bool any_category = false;
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    const int64_t bytes = stats.category_bytes[index].current;
    if (bytes == 0) continue;
    out << (any_category ? ", " : " ") << category_name(static_cast<MemoryCategory>(index))
        << " " << format_bytes(bytes);
    any_category = true;
  }
  if (!any_category) out << " none (no live tensors)";
  out << ".\n";

  out << "Hint: use a smaller batch size, or gradient checkpointing to trade compute for "
         "activation memory.";
  // Fragmentation matters when the free bytes inside partly used segments could have held
  // the request, or are a large share of what is reserved.
  const bool fragmented =
      unallocated > 0 &&
      (unallocated >= static_cast<int64_t>(rounded_bytes) || unallocated * 4 >= reserved);
  if (fragmented) {
    out << " " << format_bytes(unallocated)
        << " of reserved memory is free but scattered inside segments that still hold live "
           "blocks (fragmentation), so it could not serve this request: free the tensors that "
           "pin those segments and call empty_cache(), or allocate long-lived tensors before "
           "short-lived large ones.";
  }
  return out.str();
}

namespace {

// Rows are "| label | c1 | c2 | c3 | c4 |", 86 characters wide.
constexpr int kTableInner = 82;  // width between "| " and " |"


void append_rule(std::string& out, char fill) {
  out += '|';
  out.append(kTableInner + 2, fill);
  out += "|\n";
}

void append_text(std::string& out, const std::string& text) {
  append_line(out, "| %-*s |", kTableInner, text.c_str());
}

void append_bytes_row(std::string& out, const char* label, const Stat& stat) {
  append_line(out, "| %-22s | %12s | %12s | %12s | %12s |", label,
              format_bytes(stat.current).c_str(), format_bytes(stat.peak).c_str(),
              format_bytes(stat.allocated).c_str(), format_bytes(stat.freed).c_str());
}

void append_count_row(std::string& out, const char* label, const Stat& stat) {
  append_line(out, "| %-22s | %12lld | %12lld | %12lld | %12lld |", label,
              static_cast<long long>(stat.current), static_cast<long long>(stat.peak),
              static_cast<long long>(stat.allocated), static_cast<long long>(stat.freed));
}

}  // namespace

std::string format_memory_summary(Device device, const RawBackend& backend,
                                  const MemoryStats& stats) {
  std::string out;
  append_rule(out, '=');
  append_text(out, "memgrad memory summary, device " + device.str());
  append_text(out, backend.describe_memory());
  append_rule(out, '-');
  append_line(out, "| %-22s | %12s | %12s | %12s | %12s |", "Metric", "Current", "Peak",
              "Total alloc", "Total freed");
  append_rule(out, '-');
  append_bytes_row(out, "Allocated memory", stats.allocated_bytes);
  append_bytes_row(out, "Active memory", stats.active_bytes);
  append_bytes_row(out, "Requested memory", stats.requested_bytes);
  append_bytes_row(out, "Reserved memory", stats.reserved_bytes);
  append_bytes_row(out, "Inactive split memory", stats.inactive_split_bytes);
  append_rule(out, '-');
  append_count_row(out, "Allocations", stats.allocation_count);
  append_count_row(out, "Active allocs", stats.active_count);
  append_count_row(out, "Segments", stats.segment_count);
  append_count_row(out, "Inactive split blocks", stats.inactive_split_count);
  append_rule(out, '-');
  char counters[128];
  std::snprintf(counters, sizeof counters,
                "Alloc retries: %lld   OOMs: %lld   Backend allocs: %lld   Backend frees: %lld",
                static_cast<long long>(stats.num_alloc_retries),
                static_cast<long long>(stats.num_ooms),
                static_cast<long long>(stats.num_backend_allocs),
                static_cast<long long>(stats.num_backend_frees));
  append_text(out, counters);
  append_rule(out, '=');
  append_line(out, "| %-22s | %12s | %12s | %27s |", "Requested by category", "Current",
              "Peak", "");
  append_rule(out, '-');
  for (int index = 0; index < kNumMemoryCategories; ++index) {
    const Stat& stat = stats.category_bytes[index];
    append_line(out, "| %-22s | %12s | %12s | %27s |",
                category_name(static_cast<MemoryCategory>(index)),
                format_bytes(stat.current).c_str(), format_bytes(stat.peak).c_str(), "");
  }
  append_rule(out, '=');
  return out;
}

void append_line(std::string& out, const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  out += line;
  out += '\n';
}

}  // namespace mg
