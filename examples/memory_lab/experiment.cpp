// examples/memory_lab/experiment.cpp — verdict names and the measurement shorthands.
#include "examples/memory_lab/experiment.h"

#include <cstdio>
#include <utility>

namespace memory_lab {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::True: return "TRUE";
    case Verdict::False: return "FALSE";
    case Verdict::Partly: return "PARTLY";
  }
  return "?";
}

Measurement bytes(std::string name, std::string label, int64_t value, std::string expected) {
  return {std::move(name), std::move(label), static_cast<double>(value), Unit::Bytes, std::move(expected)};
}

Measurement ratio(std::string name, std::string label, double value, std::string expected) {
  return {std::move(name), std::move(label), value, Unit::Ratio, std::move(expected)};
}

Measurement milliseconds(std::string name, std::string label, double value) {
  return {std::move(name), std::move(label), value, Unit::Milliseconds, ""};
}

std::string with_commas(int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return value < 0 ? "-" + grouped : grouped;
}

std::string format_ratio(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

}  // namespace memory_lab
