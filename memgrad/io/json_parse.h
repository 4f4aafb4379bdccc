// io/json_parse.h — parse_json: a strict reader for the JSON that file headers use.
//
// Only the subset memgrad's file formats need (the safetensors header): objects, arrays,
// strings (every RFC 8259 escape, \uXXXX with surrogate pairs included) and integers.
// Anything else — numbers with a fraction or exponent, true/false/null, a key given twice,
// trailing text other than whitespace, nesting deeper than 64 — is rejected, because a
// header from a corrupt or hostile file must fail with a message, never be guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mg {

struct JsonMember;

struct JsonValue {
  enum class Kind { Object, Array, String, Integer };

  Kind kind = Kind::Object;
  std::string string;               // Kind::String
  int64_t integer = 0;              // Kind::Integer
  std::vector<JsonValue> elements;  // Kind::Array
  // Kind::Object, in text order. NOTE: a struct of its own, not std::pair<std::string,
  // JsonValue>: clang 14 with libstdc++ 12 rejects a pair of the still incomplete JsonValue.
  std::vector<JsonMember> members;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// "an object", "an array", ...: for error messages.
const char* json_kind_name(JsonValue::Kind kind);

// Parses `text` as exactly one value. Throws mg::Error starting with `context` (say, which
// file is read) and naming the byte offset of the problem.
JsonValue parse_json(std::string_view text, std::string_view context);

}  // namespace mg
