// memory/chrome_trace.cpp — RecordedTimeline -> Trace Event Format (JSON object form).
#include "memgrad/memory/chrome_trace.h"

#include <algorithm>

#include "memgrad/io/json.h"
#include "memgrad/memory/timeline_levels.h"

namespace mg::memory {
namespace {

// Threads of a device's process.
constexpr int kCountersThread = 0, kStepsThread = 1, kPhasesThread = 2, kOpsThread = 3;

double microseconds(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

void metadata(JsonWriter& json, const char* name, int pid, int tid, const std::string& value) {
  json.begin_object()
      .key("name").value(name).key("ph").value("M").key("ts").value(0)
      .key("pid").value(pid).key("tid").value(tid)
      .key("args").begin_object().key("name").value(value).end_object()
      .end_object();
}

void counter(JsonWriter& json, const std::string& name, int pid, int64_t time_ns, int64_t bytes) {
  json.begin_object()
      .key("name").value(name).key("ph").value("C").key("ts").value(microseconds(time_ns))
      .key("pid").value(pid).key("tid").value(kCountersThread)
      .key("args").begin_object().key("bytes").value(bytes).end_object()
      .end_object();
}

// Opens a complete slice; the caller adds args (or none) and closes it with end_object().
JsonWriter& slice(JsonWriter& json, const std::string& name, int pid, int tid, int64_t from_ns, int64_t to_ns) {
  return json.begin_object()
      .key("name").value(name).key("ph").value("X")
      .key("ts").value(microseconds(from_ns)).key("dur").value(microseconds(std::max<int64_t>(to_ns - from_ns, 0)))
      .key("pid").value(pid).key("tid").value(tid);
}

void write_device(JsonWriter& json, const RecordedTimeline& timeline, const DeviceBaseline& baseline, int pid) {
  const Device device = baseline.device;
  metadata(json, "process_name", pid, 0, "memgrad " + device.str());
  metadata(json, "thread_name", pid, kCountersThread, "memory");
  metadata(json, "thread_name", pid, kStepsThread, "steps");
  metadata(json, "thread_name", pid, kPhasesThread, "phases");
  metadata(json, "thread_name", pid, kOpsThread, "ops");

  std::vector<size_t> events;  // this device's, in order
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    if (timeline.events[i].device == device) events.push_back(i);
  }
  if (events.empty()) return;
  const int64_t end_ns = timeline.events[events.back()].time_ns;

  // Counters: each category's level when it changes (from its first nonzero value), and
  // the allocator's allocated and reserved bytes.
  CategoryBytes written{};
  std::array<bool, kNumMemoryCategories> started{};
  int64_t allocated = -1, reserved = -1;
  const int64_t first_ns = timeline.events[events.front()].time_ns;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    if (baseline.category_bytes[c] == 0) continue;
    counter(json, category_name(static_cast<MemoryCategory>(c)), pid, first_ns, baseline.category_bytes[c]);
    written[c] = baseline.category_bytes[c];
    started[c] = true;
  }
  for_each_level(timeline, baseline, [&](size_t index, const CategoryBytes& bytes) {
    const MemoryEvent& event = timeline.events[index];
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      if (bytes[c] == written[c] && (started[c] || bytes[c] == 0)) continue;
      counter(json, category_name(static_cast<MemoryCategory>(c)), pid, event.time_ns, bytes[c]);
      written[c] = bytes[c];
      started[c] = true;
    }
    if (event.allocated_bytes != allocated) counter(json, "allocated", pid, event.time_ns, event.allocated_bytes);
    if (event.reserved_bytes != reserved) counter(json, "reserved", pid, event.time_ns, event.reserved_bytes);
    allocated = event.allocated_bytes;
    reserved = event.reserved_bytes;
  });

  // Steps.
  for (size_t step = 0; step < timeline.step_start_ns.size(); ++step) {
    const int64_t from = timeline.step_start_ns[step];
    if (from > end_ns) break;  // a boundary after the last event starts no step
    const int64_t to = step + 1 < timeline.step_start_ns.size() ? std::min(timeline.step_start_ns[step + 1], end_ns)
                                                                 : end_ns;
    slice(json, "step " + std::to_string(step), pid, kStepsThread, from, to).end_object();
  }

  // Phases and ops: runs of consecutive events that share them.
  auto runs = [&](auto same, auto write) {
    for (size_t begin = 0; begin < events.size();) {
      size_t end = begin + 1;
      while (end < events.size() && same(timeline.events[events[begin]], timeline.events[events[end]])) ++end;
      const int64_t to = end < events.size() ? timeline.events[events[end]].time_ns : end_ns;
      write(begin, end, timeline.events[events[begin]].time_ns, to);
      begin = end;
    }
  };
  runs([](const MemoryEvent& a, const MemoryEvent& b) { return a.phase == b.phase; },
       [&](size_t begin, size_t, int64_t from, int64_t to) {
         const Phase phase = timeline.events[events[begin]].phase;
         if (phase != Phase::Other) slice(json, phase_name(phase), pid, kPhasesThread, from, to).end_object();
       });
  runs([](const MemoryEvent& a, const MemoryEvent& b) { return a.op == b.op && a.module_path == b.module_path; },
       [&](size_t begin, size_t end, int64_t from, int64_t to) {
         const MemoryEvent& first = timeline.events[events[begin]];
         if (first.op.empty()) return;
         int64_t allocated_bytes = 0;
         for (size_t i = begin; i < end; ++i) {
           const MemoryEvent& event = timeline.events[events[i]];
           if (event.kind == EventKind::Allocate) allocated_bytes += event.bytes;
         }
         slice(json, first.op, pid, kOpsThread, from, to)
             .key("args").begin_object()
             .key("module").value(first.module_path)
             .key("events").value(static_cast<int64_t>(end - begin))
             .key("allocated_bytes").value(allocated_bytes)
             .end_object()
             .end_object();
       });
}

}  // namespace

std::string chrome_trace_json(const RecordedTimeline& timeline) {
  JsonWriter json;
  json.begin_object().key("traceEvents").begin_array();
  for (size_t i = 0; i < timeline.baselines.size(); ++i) {
    write_device(json, timeline, timeline.baselines[i], static_cast<int>(i) + 1);
  }
  json.end_array()
      .key("displayTimeUnit").value("ms")
      .key("otherData").begin_object()
      .key("format").value("memgrad.memory_trace")
      .key("events").value(static_cast<int64_t>(timeline.events.size()))
      .key("dropped_events").value(timeline.dropped_events)
      .end_object()
      .end_object();
  return json.str();
}

}  // namespace mg::memory
