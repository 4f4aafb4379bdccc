// memory/timeline_levels.cpp — a device's category levels, event by event.
#include "memgrad/memory/timeline_levels.h"

#include <algorithm>
#include <numeric>

namespace mg::memory {

void for_each_level(const RecordedTimeline& timeline, const DeviceBaseline& baseline,
                    const std::function<void(size_t event_index, const CategoryBytes& bytes)>& visit) {
  CategoryBytes bytes = baseline.category_bytes;
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    const MemoryEvent& event = timeline.events[i];
    if (!(event.device == baseline.device)) continue;
    if (!is_segment_event(event.kind)) {
      bytes[static_cast<int>(event.category)] += event.bytes;
      if (event.kind == EventKind::Retag) bytes[static_cast<int>(event.previous_category)] -= event.bytes;
    }
    visit(i, bytes);
  }
}

int64_t peak_requested_bytes(const RecordedTimeline& timeline, const DeviceBaseline& baseline) {
  auto total = [](const CategoryBytes& bytes) { return std::accumulate(bytes.begin(), bytes.end(), int64_t{0}); };
  int64_t peak = total(baseline.category_bytes);
  for_each_level(timeline, baseline, [&](size_t, const CategoryBytes& bytes) { peak = std::max(peak, total(bytes)); });
  return peak;
}

}  // namespace mg::memory
