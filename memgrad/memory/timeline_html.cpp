// memory/timeline_html.cpp — the SVG drawing of a memory timeline.
//
// NOTE: a long recording has far more events than the chart has pixels, so each device's
// events are thinned, beyond eight per pixel column on average, to at most two per column (the one with the largest requested
// total — peaks must never vanish — and the column's last, so that levels are right),
// and hover shows the nearest kept event. Areas are drawn as steps: memory changes at an
// event and stays until the next.
#include "memgrad/memory/timeline_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/io/json.h"

namespace mg::memory {
namespace {

constexpr double kWidth = 1320, kHeight = 620;
constexpr double kLeft = 90, kRight = 20, kTop = 60, kBottom = 120;  // plot margins
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;
constexpr int kColumns = static_cast<int>(kPlotWidth);

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

// One kept event with the state right after it.
struct Point {
  size_t event;  // index into RecordedTimeline::events
  double x;
  std::array<int64_t, kNumMemoryCategories> category_bytes;
  int64_t requested;
};

std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// A round tick step near range / 5: 1, 2 or 5 times a power of `base`.
double tick_step(double range, double base) {
  if (range <= 0) return 1;
  const double rough = range / 5;
  double power = std::pow(base, std::floor(std::log(rough) / std::log(base)));
  for (double factor : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0}) {
    if (power * factor >= rough) return power * factor;
  }
  return power * 1000;
}

// Points after each kept event of `device`, thinned per pixel column.
std::vector<Point> points_of(const RecordedTimeline& timeline, const DeviceBaseline& baseline, double x_of_ns) {
  std::vector<Point> all;
  std::array<int64_t, kNumMemoryCategories> bytes = baseline.category_bytes;
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    const MemoryEvent& event = timeline.events[i];
    if (!(event.device == baseline.device)) continue;
    if (event.kind != EventKind::ReleaseCache) {
      bytes[static_cast<int>(event.category)] += event.bytes;
      if (event.kind == EventKind::Retag) bytes[static_cast<int>(event.previous_category)] -= event.bytes;
    }
    int64_t requested = 0;
    for (int64_t category_total : bytes) requested += category_total;
    all.push_back({i, kLeft + static_cast<double>(event.time_ns) * x_of_ns, bytes, requested});
  }
  if (all.size() <= static_cast<size_t>(8 * kColumns)) return all;
  std::vector<Point> kept;
  size_t begin = 0;
  while (begin < all.size()) {
    const int column = static_cast<int>(all[begin].x);
    size_t end = begin, peak = begin;
    while (end < all.size() && static_cast<int>(all[end].x) == column) {
      if (all[end].requested > all[peak].requested) peak = end;
      ++end;
    }
    kept.push_back(all[peak]);
    if (peak != end - 1) kept.push_back(all[end - 1]);
    begin = end;
  }
  return kept;
}

// A step line through (x_i, y_i): flat until the next event, then straight up or down.
std::string step_path(const std::vector<double>& xs, const std::vector<double>& ys, double x_end) {
  std::string path;
  for (size_t i = 0; i < xs.size(); ++i) {
    path += (i == 0 ? "M" : " H") + number(xs[i]);
    path += (i == 0 ? "," : " V") + number(ys[i]);
  }
  if (!xs.empty()) path += " H" + number(x_end);
  return path;
}

void draw_device(std::string& html, const RecordedTimeline& timeline, const DeviceBaseline& baseline, int chart) {
  int64_t end_ns = 1;
  for (const MemoryEvent& event : timeline.events) end_ns = std::max(end_ns, event.time_ns);
  const double x_of_ns = kPlotWidth / static_cast<double>(end_ns);
  const std::vector<Point> points = points_of(timeline, baseline, x_of_ns);

  int64_t top_bytes = 1;
  std::array<int64_t, kNumMemoryCategories> peak{};
  for (const Point& point : points) {
    const MemoryEvent& event = timeline.events[point.event];
    top_bytes = std::max({top_bytes, point.requested, event.allocated_bytes, event.reserved_bytes});
    for (int c = 0; c < kNumMemoryCategories; ++c) peak[c] = std::max(peak[c], point.category_bytes[c]);
  }
  const double y_step = tick_step(static_cast<double>(top_bytes), 2);
  const double y_top = std::ceil(static_cast<double>(top_bytes) / y_step) * y_step;
  auto y_of = [&](double bytes) { return kTop + kPlotHeight - bytes / y_top * kPlotHeight; };
  const double x_end = kLeft + kPlotWidth;

  html += "<h2>" + escape_html(baseline.device.str()) + "</h2>\n";
  html += "<div class=\"chart\"><svg id=\"chart" + std::to_string(chart) + "\" viewBox=\"0 0 " + number(kWidth) + " " +
          number(kHeight) + "\" width=\"" + number(kWidth) + "\" height=\"" + number(kHeight) + "\">\n";

  // Axes and grid.
  for (double tick = 0; tick <= y_top + 0.5; tick += y_step) {
    const std::string y = number(y_of(tick));
    html += "<line x1=\"" + number(kLeft) + "\" x2=\"" + number(x_end) + "\" y1=\"" + y + "\" y2=\"" + y +
            "\" class=\"grid\"/><text x=\"" + number(kLeft - 6) + "\" y=\"" + y + "\" class=\"ylabel\">" +
            escape_html(format_bytes(static_cast<int64_t>(tick))) + "</text>\n";
  }
  const double end_ms = static_cast<double>(end_ns) / 1e6;
  const double x_tick = tick_step(end_ms, 10);
  for (double tick = 0; tick <= end_ms + 1e-9; tick += x_tick) {
    const std::string x = number(kLeft + tick * 1e6 * x_of_ns);
    html += "<text x=\"" + x + "\" y=\"" + number(kTop + kPlotHeight + 16) + "\" class=\"xlabel\">" +
            number(tick) + " ms</text>\n";
  }

  // Stacked areas, bottom up in kDrawOrder.
  std::vector<double> xs;
  for (const Point& point : points) xs.push_back(point.x);
  std::vector<int64_t> below(points.size(), 0);
  for (MemoryCategory category : kDrawOrder) {
    const int c = static_cast<int>(category);
    std::vector<double> top_y, bottom_y;
    for (size_t i = 0; i < points.size(); ++i) {
      bottom_y.push_back(y_of(static_cast<double>(below[i])));
      below[i] += points[i].category_bytes[c];
      top_y.push_back(y_of(static_cast<double>(below[i])));
    }
    if (points.empty() || peak[c] == 0) continue;
    std::string path = step_path(xs, top_y, x_end);
    // Back along the bottom edge, the same steps in reverse.
    path += " V" + number(bottom_y.back());
    for (size_t i = points.size(); i-- > 0;) {
      path += " H" + number(xs[i]);
      if (i > 0) path += " V" + number(bottom_y[i - 1]);
    }
    path += " Z";
    html += "<path d=\"" + path + "\" fill=\"" + kCategoryColours[c] + "\" fill-opacity=\"0.85\"><title>" +
            category_name(static_cast<MemoryCategory>(c)) + "</title></path>\n";
  }

  // Allocated and reserved lines.
  std::vector<double> allocated_y, reserved_y;
  for (const Point& point : points) {
    allocated_y.push_back(y_of(static_cast<double>(timeline.events[point.event].allocated_bytes)));
    reserved_y.push_back(y_of(static_cast<double>(timeline.events[point.event].reserved_bytes)));
  }
  html += "<path d=\"" + step_path(xs, reserved_y, x_end) + "\" class=\"reserved\"/>\n";
  html += "<path d=\"" + step_path(xs, allocated_y, x_end) + "\" class=\"allocated\"/>\n";

  // Step boundaries.
  for (size_t step = 0; step < timeline.step_start_ns.size(); ++step) {
    if (timeline.step_start_ns[step] > end_ns) continue;  // a step that allocated nothing yet
    const std::string x = number(kLeft + static_cast<double>(timeline.step_start_ns[step]) * x_of_ns);
    if (step > 0) {
      html += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + number(kTop - 6) + "\" y2=\"" +
              number(kTop + kPlotHeight) + "\" class=\"step\"/>\n";
    }
    html += "<text x=\"" + x + "\" y=\"" + number(kTop - 10) + "\" class=\"steplabel\">step " +
            std::to_string(step) + "</text>\n";
  }

  // The phase band under the time axis.
  const double band_y = kTop + kPlotHeight + 26;
  for (size_t i = 0; i < points.size();) {
    const Phase phase = timeline.events[points[i].event].phase;
    size_t next = i + 1;
    while (next < points.size() && timeline.events[points[next].event].phase == phase) ++next;
    const double from = points[i].x, to = next < points.size() ? points[next].x : x_end;
    html += "<rect x=\"" + number(from) + "\" y=\"" + number(band_y) + "\" width=\"" +
            number(std::max(to - from, 0.5)) + "\" height=\"10\" fill=\"" + kPhaseColours[static_cast<int>(phase)] +
            "\"/>\n";
    i = next;
  }
  html += "<text x=\"" + number(kLeft - 6) + "\" y=\"" + number(band_y + 9) + "\" class=\"ylabel\">phase</text>\n";

  // Legend: categories with their peaks, the two lines, the phases.
  // Three rows: two of categories, then the lines and the phases.
  double legend_x = kLeft;
  double legend_y = kHeight - 66;
  auto legend_item = [&](const std::string& swatch, const std::string& label) {
    html += swatch + "<text x=\"" + number(legend_x + 16) + "\" y=\"" + number(legend_y + 10) + "\" class=\"legend\">" +
            escape_html(label) + "</text>\n";
    legend_x += 30 + 7.4 * static_cast<double>(label.size());
  };
  auto box = [&](const char* colour) {
    return "<rect x=\"" + number(legend_x) + "\" y=\"" + number(legend_y) + "\" width=\"12\" height=\"12\" fill=\"" +
           colour + "\"/>";
  };
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    if (i == kNumMemoryCategories / 2) {
      legend_x = kLeft;
      legend_y += 22;
    }
    const MemoryCategory category = kDrawOrder[i];
    const int c = static_cast<int>(category);
    legend_item(box(kCategoryColours[c]), std::string(category_name(category)) + " " + format_bytes(peak[c]));
  }
  auto line = [&](const char* css) {
    return "<line x1=\"" + number(legend_x) + "\" x2=\"" + number(legend_x + 12) + "\" y1=\"" + number(legend_y + 6) +
           "\" y2=\"" + number(legend_y + 6) + "\" class=\"" + css + "\"/>";
  };
  legend_x = kLeft;
  legend_y += 22;
  legend_item(line("allocated"), "allocated");
  legend_item(line("reserved"), "reserved");
  for (int p = 1; p < kNumPhases; ++p) legend_item(box(kPhaseColours[p]), phase_name(static_cast<Phase>(p)));

  html += "<line class=\"cursor\" x1=\"0\" x2=\"0\" y1=\"" + number(kTop) + "\" y2=\"" + number(kTop + kPlotHeight) +
          "\" visibility=\"hidden\"/>\n</svg><div class=\"tip\"></div></div>\n";

  // The kept events for the hover script, as columns; labels by index.
  JsonWriter json;
  json.begin_object();
  auto column = [&](const char* name, auto value_of) {
    json.key(name).begin_array();
    for (const Point& point : points) json.value(value_of(point, timeline.events[point.event]));
    json.end_array();
  };
  column("x", [](const Point& p, const MemoryEvent&) { return static_cast<int64_t>(p.x * 10); });
  column("t", [](const Point&, const MemoryEvent& e) { return e.time_ns / 1000; });
  column("kind", [](const Point&, const MemoryEvent& e) { return std::string(event_kind_name(e.kind)); });
  column("category", [](const Point&, const MemoryEvent& e) { return std::string(category_name(e.category)); });
  column("from", [](const Point&, const MemoryEvent& e) {
    return e.kind == EventKind::Retag ? std::string(category_name(e.previous_category)) : std::string();
  });
  column("op", [](const Point&, const MemoryEvent& e) { return e.op; });
  column("module", [](const Point&, const MemoryEvent& e) { return e.module_path; });
  column("phase", [](const Point&, const MemoryEvent& e) { return std::string(phase_name(e.phase)); });
  column("step", [](const Point&, const MemoryEvent& e) { return e.step; });
  column("bytes", [](const Point&, const MemoryEvent& e) { return format_bytes(e.bytes); });
  column("allocated", [](const Point&, const MemoryEvent& e) { return format_bytes(e.allocated_bytes); });
  column("reserved", [](const Point&, const MemoryEvent& e) { return format_bytes(e.reserved_bytes); });
  json.end_object();
  std::string data = json.str();
  // "<" only occurs inside strings, where \u003c means the same: no "</script>" can end the block early.
  std::string safe;
  for (char c : data) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);
  html += "<script type=\"application/json\" id=\"data" + std::to_string(chart) + "\">" + safe + "</script>\n";
}

constexpr const char* kStyle = R"(<style>
body { font-family: sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 12px 0 0; }
.summary { font-size: 13px; color: #555; }
.chart { position: relative; }
.grid { stroke: #e4e4e4; } .step { stroke: #555; stroke-dasharray: 4 3; }
.ylabel { font-size: 11px; text-anchor: end; dominant-baseline: middle; fill: #555; }
.xlabel, .steplabel { font-size: 11px; text-anchor: middle; fill: #555; }
.legend { font-size: 12px; }
.allocated { stroke: #111; stroke-width: 1.5; fill: none; }
.reserved { stroke: #111; stroke-width: 1.2; stroke-dasharray: 6 3; fill: none; }
.cursor { stroke: #000; stroke-width: 1; }
.tip { position: absolute; display: none; pointer-events: none; background: #fff; border: 1px solid #999;
       padding: 6px 8px; font-size: 12px; line-height: 1.35; white-space: pre; box-shadow: 2px 2px 6px #0003; }
</style>
)";

// Hover: the kept event nearest the mouse, found by bisection on x.
constexpr const char* kScript = R"(<script>
document.querySelectorAll('.chart svg').forEach(function (svg) {
  var d = JSON.parse(document.getElementById('data' + svg.id.slice(5)).textContent);
  var tip = svg.parentNode.querySelector('.tip'), cursor = svg.querySelector('.cursor');
  svg.addEventListener('mousemove', function (e) {
    if (!d.x.length) return;
    var p = svg.createSVGPoint(); p.x = e.clientX; p.y = e.clientY;
    var x = p.matrixTransform(svg.getScreenCTM().inverse()).x * 10, lo = 0, hi = d.x.length - 1;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (d.x[mid] < x) lo = mid + 1; else hi = mid; }
    if (lo > 0 && x - d.x[lo - 1] < d.x[lo] - x) lo -= 1;
    cursor.setAttribute('x1', d.x[lo] / 10); cursor.setAttribute('x2', d.x[lo] / 10);
    cursor.setAttribute('visibility', 'visible');
    tip.textContent = (d.t[lo] / 1000).toFixed(3) + ' ms  step ' + d.step[lo] + '  ' + d.phase[lo] + '\n' +
      d.kind[lo] + ' ' + d.bytes[lo] + '  ' + (d.from[lo] ? d.from[lo] + ' -> ' : '') + d.category[lo] + '\n' +
      'op: ' + (d.op[lo] || '-') + '\nmodule: ' + (d.module[lo] || '-') + '\n' +
      'allocated ' + d.allocated[lo] + ', reserved ' + d.reserved[lo];
    tip.style.display = 'block';
    tip.style.left = Math.min(e.offsetX + 14, svg.clientWidth - 320) + 'px'; tip.style.top = (e.offsetY + 14) + 'px';
  });
  svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; cursor.setAttribute('visibility', 'hidden'); });
});
</script>
)";

}  // namespace

std::string timeline_html(const RecordedTimeline& timeline) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<title>memgrad memory timeline</title>\n";
  html += kStyle;
  // A boundary after the last event (marked when a run ended) starts no step.
  const int64_t last_ns = timeline.events.empty() ? 0 : timeline.events.back().time_ns;
  const auto steps = std::count_if(timeline.step_start_ns.begin(), timeline.step_start_ns.end(),
                                   [&](int64_t start) { return start <= last_ns; });
  html += "</head>\n<body>\n<h1>memgrad memory timeline</h1>\n<div class=\"summary\">" +
          std::to_string(timeline.events.size()) + " events, " + std::to_string(steps) + " steps" +
          (timeline.dropped_events > 0
               ? ", " + std::to_string(timeline.dropped_events) + " older events dropped (ring buffer of " +
                     std::to_string(timeline.capacity) + ")"
               : std::string()) +
          ". Areas: requested bytes by category; solid line: allocated; dashed: reserved. "
          "Hover for the nearest event.</div>\n";
  if (timeline.baselines.empty()) html += "<p>No allocations were recorded.</p>\n";
  for (size_t i = 0; i < timeline.baselines.size(); ++i) {
    draw_device(html, timeline, timeline.baselines[i], static_cast<int>(i));
  }
  html += kScript;
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace mg::memory
