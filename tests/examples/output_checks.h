// tests/examples/output_checks.h — reading what the example programs write, for their
// tests: a member of their JSON (--summary-json, --bench, memory_lab's --json), and a
// checkpoint's tensors as raw bytes (so that two checkpoints compare exactly).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "memgrad/io/safetensors.h"

namespace mg_test {

// The text after "key": in `json`, up to the next ',' or '}' (or the whole nested array or
// flat object); the first such key at or after "within": when `within` is given (memory
// categories appear in both "bytes_by_category" and "peak_bytes_by_category").
inline std::string json_field(const std::string& json, const std::string& key, const std::string& within = "") {
  const size_t start = within.empty() ? 0 : json.find("\"" + within + "\":");
  REQUIRE(start != std::string::npos);
  const size_t at = json.find("\"" + key + "\":", start);
  REQUIRE(at != std::string::npos);
  const size_t begin = at + key.size() + 3;
  if (json[begin] == '{' || json[begin] == '[') return json.substr(begin, json.find_first_of("}]", begin) - begin + 1);
  return json.substr(begin, json.find_first_of(",}", begin) - begin);
}

// json_field as a number.
inline double json_number(const std::string& json, const std::string& key, const std::string& within = "") {
  return std::strtod(json_field(json, key, within).c_str(), nullptr);
}

// json_field as an integer: byte counts compare exactly, past float64's 2^53.
inline int64_t json_integer(const std::string& json, const std::string& key, const std::string& within = "") {
  return std::strtoll(json_field(json, key, within).c_str(), nullptr, 10);
}

// A tensor's raw bytes. A failed CHECK prints them as their size and an FNV-1a hash (below),
// not element by element: Catch2 wraps a printed value's lines in time quadratic in its
// length, and a checkpoint's megabytes then take hours (a CI run hung on one, 2026-12-07).
struct TensorBytes : std::vector<uint8_t> {
  using std::vector<uint8_t>::vector;
};

// A safetensors file's tensors by name, as raw bytes.
inline std::map<std::string, TensorBytes> tensor_bytes(const std::string& path) {
  std::map<std::string, TensorBytes> bytes;
  for (const auto& [name, tensor] : mg::load_safetensors(path)) {
    const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
    bytes[name].assign(data, data + tensor.nbytes());
  }
  return bytes;
}

// Two checkpoints of one run hold the same tensors to the byte, but for the wall-clock
// times (run.seconds*): what a resumed run must end with.
inline void check_same_checkpoint(const std::string& expected_path, const std::string& actual_path) {
  const auto expected = tensor_bytes(expected_path);
  const auto actual = tensor_bytes(actual_path);
  REQUIRE(expected.size() == actual.size());
  for (const auto& [name, bytes] : expected) {
    if (name.rfind("run.seconds", 0) == 0) continue;
    INFO(name);
    REQUIRE(actual.count(name) == 1);
    CHECK(actual.at(name) == bytes);
  }
}

}  // namespace mg_test

template <>
struct Catch::StringMaker<mg_test::TensorBytes> {
  static std::string convert(const mg_test::TensorBytes& bytes) {
    uint64_t hash = 14695981039346656037ull;
    for (const uint8_t byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
    return std::to_string(bytes.size()) + " bytes, FNV-1a " + std::to_string(hash);
  }
};
