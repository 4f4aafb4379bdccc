// memory/live_tensor_report.cpp — live_tensor_report: live tensors grouped by category,
// module path and op, largest groups first (what the examples print as their leak check).
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/memory/recorder.h"

namespace mg::memory {

std::string live_tensor_report(const std::vector<LiveTensor>& tensors, const std::string& title) {
  struct Group {
    int64_t count = 0;
    int64_t bytes = 0;
    std::map<std::string, int64_t> shapes;  // "(8, 3) float32" -> tensors
  };
  using Key = std::tuple<MemoryCategory, std::string, std::string>;  // category, module, op
  std::map<Key, Group> groups;
  int64_t total = 0;
  for (const LiveTensor& tensor : tensors) {
    Group& group = groups[Key{tensor.category, tensor.module_path, tensor.op}];
    ++group.count;
    group.bytes += tensor.bytes;
    std::ostringstream shape;
    if (tensor.described) {
      shape << tensor.sizes << " " << tensor.dtype;
    } else {
      shape << "(scratch)";
    }
    ++group.shapes[shape.str()];
    total += tensor.bytes;
  }
  std::vector<std::pair<Key, Group>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  std::ostringstream out;
  out << title << ": " << tensors.size() << " tensors, " << format_bytes(total) << "\n";
  if (tensors.empty()) return out.str();
  char line[512];
  std::snprintf(line, sizeof(line), "  %-15s %-24s %-22s %7s %12s  %s\n", "category", "module", "op", "tensors",
                "bytes", "shapes");
  out << line;
  for (const auto& [key, group] : ordered) {
    const auto& [category, module, op] = key;
    // The commonest shapes first, at most three.
    std::vector<std::pair<std::string, int64_t>> shapes(group.shapes.begin(), group.shapes.end());
    std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string shape_text;
    for (size_t i = 0; i < shapes.size() && i < 3; ++i) {
      if (i > 0) shape_text += ", ";
      shape_text += shapes[i].first + (shapes[i].second > 1 ? " x" + std::to_string(shapes[i].second) : "");
    }
    if (shapes.size() > 3) shape_text += ", ...";
    std::snprintf(line, sizeof(line), "  %-15s %-24s %-22s %7lld %12s  %s\n", category_name(category),
                  module.empty() ? "-" : module.c_str(), op.empty() ? "-" : op.c_str(),
                  static_cast<long long>(group.count), format_bytes(group.bytes).c_str(), shape_text.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace mg::memory
