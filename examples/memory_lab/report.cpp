// examples/memory_lab/report.cpp — the lab's text and JSON output.
#include "examples/memory_lab/report.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include <memgrad/io/json.h>

namespace memory_lab {
namespace {

std::string format_value(const Measurement& measurement) {
  char text[64];
  switch (measurement.unit) {
    case Unit::Bytes: return with_commas(static_cast<int64_t>(measurement.value)) + " B";
    case Unit::Ratio: return format_ratio(measurement.value);
    case Unit::Milliseconds: std::snprintf(text, sizeof text, "%.2f ms", measurement.value); return text;
  }
  return "";
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string right_aligned(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

std::string format_block(const Experiment& experiment, const Result& result) {
  size_t label_width = 0, value_width = 0;
  for (const Measurement& measurement : result.measurements) {
    label_width = std::max(label_width, measurement.label.size());
    value_width = std::max(value_width, format_value(measurement).size());
  }
  std::string block = "== " + experiment.name + "\nclaim:   " + experiment.claim + "\nmeasured:\n";
  for (const Measurement& measurement : result.measurements) {
    block += "  " + padded(measurement.label, label_width) + "  " +
             right_aligned(format_value(measurement), value_width);
    if (!measurement.expected.empty()) block += "   (expected " + measurement.expected + ")";
    block += '\n';
  }
  return block + "verdict: " + verdict_name(result.verdict) + " — " + result.why + "\n";
}

std::string format_table(const std::vector<Outcome>& outcomes) {
  size_t name_width = 10;
  for (const auto& [experiment, result] : outcomes) name_width = std::max(name_width, experiment->name.size());
  std::string table = padded("experiment", name_width) + "  verdict  why\n";
  for (const auto& [experiment, result] : outcomes) {
    table += padded(experiment->name, name_width) + "  " + padded(verdict_name(result.verdict), 7) + "  " +
             result.why + '\n';
  }
  return table;
}

std::string to_json(mg::Device device, const std::vector<Outcome>& outcomes) {
  mg::JsonWriter json;
  json.begin_object().key("device").value(device.str()).key("experiments").begin_object();
  for (const auto& [experiment, result] : outcomes) {
    json.key(experiment->name)
        .begin_object()
        .key("claim").value(experiment->claim)
        .key("verdict").value(verdict_name(result.verdict))
        .key("why").value(result.why)
        .key("measured").begin_object();
    for (const Measurement& measurement : result.measurements) {
      json.key(measurement.name);
      if (measurement.unit == Unit::Bytes) {
        json.value(static_cast<int64_t>(measurement.value));
      } else {
        json.value(measurement.value);
      }
    }
    json.end_object().end_object();
  }
  json.end_object().end_object();
  return json.str();
}

}  // namespace memory_lab
