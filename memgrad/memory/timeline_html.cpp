// memory/timeline_html.cpp — the page: a skeleton, the recording as one JSON block, and
// the script that draws it (memory/timeline_script.cpp).
//
// NOTE: the page carries every event, not a thinned copy, so that zooming in draws the
// zoomed range's own detail. Labels (ops, module paths) go once into a table and events
// name them by index, and events are stored as columns of numbers: a 100,000-event
// recording makes a page of a few MB that a browser parses in well under a second
// (docs/memory_timeline.md has the measured figures).
#include "memgrad/memory/timeline_html.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "memgrad/io/json.h"
#include "memgrad/memory/timeline_script.h"

namespace mg::memory {
namespace {

// Tableau 10: distinct for most kinds of colour blindness.
constexpr const char* kCategoryColours[kNumMemoryCategories] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                                  "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
                                                                  "#ff9da7"};
// Stacking order, bottom up: what lives across steps first (a steady floor), what comes
// and goes within a step last, so a step's rise and fall reads as the top layers' shape.
constexpr MemoryCategory kDrawOrder[kNumMemoryCategories] = {
    MemoryCategory::Parameter,     MemoryCategory::Input,         MemoryCategory::OptimizerState,
    MemoryCategory::AutocastCache, MemoryCategory::Gradient,      MemoryCategory::Activation,
    MemoryCategory::Communication, MemoryCategory::Temporary,     MemoryCategory::Workspace};
constexpr const char* kPhaseColours[kNumPhases] = {"#bab0ac", "#4e79a7", "#e15759", "#59a14f"};

// Strings (ops, module paths) stored once; events refer to them by index. 0 is "".
// NOTE: the data holds integers and strings only (flags as 0 or 1), as io/json_parse reads.
class LabelTable {
 public:
  LabelTable() { index_of(""); }
  int64_t index_of(const std::string& text) {
    auto [it, inserted] = indices_.try_emplace(text, static_cast<int64_t>(texts_.size()));
    if (inserted) texts_.push_back(text);
    return it->second;
  }
  const std::vector<std::string>& texts() const { return texts_; }

 private:
  std::unordered_map<std::string, int64_t> indices_;
  std::vector<std::string> texts_;
};

void write_device(JsonWriter& json, const RecordedTimeline& timeline, const DeviceBaseline& baseline,
                  LabelTable& labels) {
  std::vector<const MemoryEvent*> events;
  for (const MemoryEvent& event : timeline.events) {
    if (event.device == baseline.device) events.push_back(&event);
  }
  json.begin_object().key("name").value(baseline.device.str());
  json.key("baseline").begin_array();
  for (int64_t bytes : baseline.category_bytes) json.value(bytes);
  json.end_array();
  // One array per field, an entry per event.
  auto column = [&](const char* name, auto value_of) {
    json.key(name).begin_array();
    for (const MemoryEvent* event : events) json.value(value_of(*event));
    json.end_array();
  };
  column("time_ns", [](const MemoryEvent& e) { return e.time_ns; });
  column("kind", [](const MemoryEvent& e) { return static_cast<int64_t>(e.kind); });
  column("bytes", [](const MemoryEvent& e) { return e.bytes; });
  column("category", [](const MemoryEvent& e) { return static_cast<int64_t>(e.category); });
  column("previous_category", [](const MemoryEvent& e) { return static_cast<int64_t>(e.previous_category); });
  column("op", [&](const MemoryEvent& e) { return labels.index_of(e.op); });
  column("module", [&](const MemoryEvent& e) { return labels.index_of(e.module_path); });
  column("phase", [](const MemoryEvent& e) { return static_cast<int64_t>(e.phase); });
  column("step", [](const MemoryEvent& e) { return e.step; });
  column("allocated", [](const MemoryEvent& e) { return e.allocated_bytes; });
  column("reserved", [](const MemoryEvent& e) { return e.reserved_bytes; });
  column("address", [](const MemoryEvent& e) { return static_cast<int64_t>(e.address); });
  column("block_bytes", [](const MemoryEvent& e) { return e.block_bytes; });
  // The segments at the end, with their live blocks: the state the page walks back from.
  json.key("segments").begin_array();
  for (const RecordedSegment& segment : timeline.segments) {
    if (!(segment.device == baseline.device)) continue;
    json.begin_object()
        .key("address").value(static_cast<int64_t>(segment.address))
        .key("bytes").value(segment.bytes)
        .key("stream").value(static_cast<int64_t>(segment.stream))
        .key("small").value(static_cast<int64_t>(segment.small_pool))
        .key("blocks").begin_array();
    for (const RecordedBlock& block : segment.live_blocks) {
      json.begin_array()
          .value(static_cast<int64_t>(block.address))
          .value(block.requested_bytes)
          .value(block.block_bytes)
          .value(static_cast<int64_t>(block.category))
          .value(labels.index_of(block.op))
          .value(labels.index_of(block.module_path))
          .value(block.step)
          .value(static_cast<int64_t>(block.before_recording))
          .end_array();
    }
    json.end_array().end_object();
  }
  json.end_array().end_object();
}

std::string page_data(const RecordedTimeline& timeline) {
  LabelTable labels;
  JsonWriter json;
  json.begin_object();
  json.key("categories").begin_array();
  for (int c = 0; c < kNumMemoryCategories; ++c) json.value(category_name(static_cast<MemoryCategory>(c)));
  json.end_array();
  json.key("colours").begin_array();
  for (const char* colour : kCategoryColours) json.value(colour);
  json.end_array();
  json.key("draw_order").begin_array();
  for (MemoryCategory category : kDrawOrder) json.value(static_cast<int64_t>(category));
  json.end_array();
  json.key("phases").begin_array();
  for (int p = 0; p < kNumPhases; ++p) json.value(phase_name(static_cast<Phase>(p)));
  json.end_array();
  json.key("phase_colours").begin_array();
  for (const char* colour : kPhaseColours) json.value(colour);
  json.end_array();
  json.key("kinds").begin_array();
  for (EventKind kind : {EventKind::Allocate, EventKind::Free, EventKind::Retag, EventKind::SegmentAllocate,
                         EventKind::SegmentFree}) {
    json.value(event_kind_name(kind));
  }
  json.end_array();
  json.key("step_start_ns").begin_array();
  for (int64_t start : timeline.step_start_ns) json.value(start);
  json.end_array();
  json.key("dropped_events").value(timeline.dropped_events);
  json.key("capacity").value(static_cast<int64_t>(timeline.capacity));
  json.key("devices").begin_array();
  for (const DeviceBaseline& baseline : timeline.baselines) write_device(json, timeline, baseline, labels);
  json.end_array();
  json.key("labels").begin_array();
  for (const std::string& label : labels.texts()) json.value(label);
  json.end_array();
  json.end_object();
  // "<" only occurs inside strings, where \u003c means the same: no "</script>" can end the block early.
  std::string safe;
  const std::string text = json.str();
  safe.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      safe += "\\u003c";
    } else {
      safe += c;
    }
  }
  return safe;
}

constexpr std::string_view kHead = R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>memgrad memory timeline</title>
<style>
html, body { height: 100%; margin: 0; }
body { font-family: sans-serif; color: #222; display: flex; flex-direction: column; }
header { padding: 8px 16px 0; }
h1 { font-size: 18px; margin: 0 0 2px; display: inline-block; margin-right: 12px; }
.summary { font-size: 12px; color: #555; }
.toolbar { font-size: 12px; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.toolbar button, .legend button { font-size: 12px; padding: 2px 8px; cursor: pointer; }
.legend { display: flex; flex-wrap: wrap; gap: 4px; font-size: 12px; padding: 0 16px; }
.legend button { border: 1px solid #bbb; background: #fff; border-radius: 3px; }
.legend button.off { opacity: 0.35; text-decoration: line-through; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
#chart { flex: 3 1 0; min-height: 220px; position: relative; }
#chart svg { width: 100%; height: 100%; display: block; cursor: crosshair; user-select: none; }
.grid { stroke: #e4e4e4; } .step { stroke: #555; stroke-dasharray: 4 3; }
.ylabel { font-size: 11px; text-anchor: end; dominant-baseline: middle; fill: #555; }
.xlabel, .steplabel { font-size: 11px; text-anchor: middle; fill: #555; }
.allocated { stroke: #111; stroke-width: 1.5; fill: none; }
.reserved { stroke: #111; stroke-width: 1.2; stroke-dasharray: 6 3; fill: none; }
.cursor { stroke: #000; stroke-width: 1; }
.pinned { stroke: #c00; stroke-width: 1; stroke-dasharray: 2 2; }
#tip { position: absolute; display: none; pointer-events: none; background: #fff; border: 1px solid #999;
       padding: 6px 8px; font-size: 12px; line-height: 1.35; white-space: pre; box-shadow: 2px 2px 6px #0003; }
#panels { flex: 2 1 0; min-height: 160px; display: flex; gap: 12px; padding: 4px 16px 8px; overflow: hidden; }
#panels section { flex: 1 1 0; overflow: auto; border-top: 1px solid #ddd; }
#panels h2 { font-size: 13px; margin: 4px 0; }
table { border-collapse: collapse; font-size: 12px; }
td, th { padding: 1px 8px 1px 0; text-align: left; white-space: nowrap; }
td.bytes { text-align: right; font-variant-numeric: tabular-nums; }
#segments svg { display: block; }
</style>
</head>
<body>
<header>
<h1>memgrad memory timeline</h1><span class="summary" id="summary"></span>
<div class="toolbar"><label id="device-choice">device <select id="device"></select></label>
<button id="zoom-in" title="or the mouse wheel">zoom in</button><button id="zoom-out">zoom out</button>
<button id="reset" title="or double-click the chart">whole recording</button>
<span id="range"></span>
<span>· wheel: zoom · drag: pan · click: pin the moment the tables below show</span></div>
</header>
<div class="legend" id="legend"></div>
<div id="chart"><svg id="chart-svg" role="img" aria-label="memory over time"></svg><div id="tip"></div></div>
<div id="panels">
<section id="largest"><h2 id="largest-title">Largest live allocations</h2><table id="largest-table"></table></section>
<section id="segments"><h2 id="segments-title">Segments</h2><div id="segments-view"></div></section>
</div>
)";

}  // namespace

std::string timeline_html(const RecordedTimeline& timeline) {
  std::string html(kHead);
  html += "<script type=\"application/json\" id=\"memgrad-data\">";
  html += page_data(timeline);
  html += "</script>\n<script>\n";
  html += timeline_script();
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace mg::memory
