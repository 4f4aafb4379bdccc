// memory/timeline_json.cpp — a recording as one JSON object (Recorder::write_json): integers
// and strings only, so that io/json_parse reads it back.
#include "memgrad/io/json.h"
#include "memgrad/memory/recorder.h"

namespace mg::memory {

std::string timeline_json(const RecordedTimeline& timeline) {
  JsonWriter json;
  json.begin_object()
      .key("format").value("memgrad.memory_timeline")
      .key("capacity").value(static_cast<int64_t>(timeline.capacity))
      .key("dropped_events").value(timeline.dropped_events);
  json.key("step_start_ns").begin_array();
  for (int64_t start : timeline.step_start_ns) json.value(start);
  json.end_array();
  json.key("devices").begin_array();
  for (const DeviceBaseline& baseline : timeline.baselines) {
    json.begin_object().key("device").value(baseline.device.str()).key("baseline_category_bytes").begin_object();
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      json.key(category_name(static_cast<MemoryCategory>(c))).value(baseline.category_bytes[c]);
    }
    json.end_object().end_object();
  }
  json.end_array();
  json.key("events").begin_array();
  for (const MemoryEvent& event : timeline.events) {
    json.begin_object()
        .key("time_ns").value(event.time_ns)
        .key("device").value(event.device.str())
        .key("kind").value(event_kind_name(event.kind))
        .key("bytes").value(event.bytes)
        .key("category").value(category_name(event.category));
    if (event.kind == EventKind::Retag) json.key("previous_category").value(category_name(event.previous_category));
    json.key("op").value(event.op)
        .key("module").value(event.module_path)
        .key("phase").value(phase_name(event.phase))
        .key("step").value(event.step)
        .key("allocated_bytes").value(event.allocated_bytes)
        .key("reserved_bytes").value(event.reserved_bytes)
        .key("address").value(static_cast<int64_t>(event.address))
        .key("block_bytes").value(event.block_bytes)
        .end_object();
  }
  json.end_array().end_object();
  return json.str();
}

}  // namespace mg::memory
