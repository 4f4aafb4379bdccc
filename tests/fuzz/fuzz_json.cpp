// tests/fuzz/fuzz_json.cpp — libFuzzer target for parse_json (io/json_parse.h), the
// reader of safetensors headers: any text either parses or throws mg::Error naming the
// context; what parses is written back with JsonWriter and must read back the same.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "memgrad/io/json.h"
#include "memgrad/io/json_parse.h"
#include "fuzz_support.h"

namespace {

constexpr std::string_view kContext = "fuzzed JSON";

void write_value(mg::JsonWriter& json, const mg::JsonValue& value) {
  switch (value.kind) {
    case mg::JsonValue::Kind::Object:
      json.begin_object();
      for (const auto& [key, member] : value.members) write_value(json.key(key), member);
      json.end_object();
      return;
    case mg::JsonValue::Kind::Array:
      json.begin_array();
      for (const mg::JsonValue& element : value.elements) write_value(json, element);
      json.end_array();
      return;
    case mg::JsonValue::Kind::String: json.value(std::string_view(value.string)); return;
    case mg::JsonValue::Kind::Integer: json.value(value.integer); return;
  }
}

std::string written(const mg::JsonValue& value) {
  mg::JsonWriter json;
  write_value(json, value);
  return json.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  mg::JsonValue value;
  try {
    value = mg::parse_json(text, kContext);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, kContext);
    return 0;
  }
  // NOTE: the top level may be any value; JsonWriter writes any value too.
  const std::string first = written(value);
  const std::string second = written(mg::parse_json(first, "JsonWriter's text"));
  if (first != second) {
    std::fprintf(stderr, "fuzz: JSON does not read back as written:\n  %s\n  %s\n", first.c_str(), second.c_str());
    std::abort();
  }
  return 0;
}
