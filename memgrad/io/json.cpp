// io/json.cpp — JsonWriter: separators, escaping, number formatting and the checks that
// keep the output well-formed.
#include "memgrad/io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "memgrad/core/error.h"

namespace mg {

void JsonWriter::before_value(const char* what) {
  MG_CHECK(!done_, "JsonWriter: cannot write ", what, " after the top-level value is complete. ",
           "Hint: wrap several values in begin_object() or begin_array().");
  if (scopes_.empty()) return;
  if (scopes_.back() == Scope::Object) {
    MG_CHECK(after_key_, "JsonWriter: ", what, " inside an object needs a key first. Hint: call ",
             "key(\"name\") before it.");
    after_key_ = false;
    return;
  }
  if (!first_in_scope_) text_ += ',';
  first_in_scope_ = false;
}

JsonWriter& JsonWriter::raw_value(std::string_view text) {
  before_value("a value");
  text_ += text;
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value("an object");
  text_ += '{';
  scopes_.push_back(Scope::Object);
  first_in_scope_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value("an array");
  text_ += '[';
  scopes_.push_back(Scope::Array);
  first_in_scope_ = true;
  return *this;
}

void JsonWriter::close(Scope scope, const char* what) {
  MG_CHECK(!scopes_.empty() && scopes_.back() == scope, "JsonWriter: ", what,
           " does not match the innermost open ",
           scopes_.empty() ? "scope (none is open)"
                           : scopes_.back() == Scope::Object ? "object" : "array",
           ".");
  MG_CHECK(!after_key_, "JsonWriter: ", what, " right after a key; the key needs a value.");
  scopes_.pop_back();
  text_ += scope == Scope::Object ? '}' : ']';
  // The closed scope was a value of its parent, so the parent's next entry needs a comma.
  first_in_scope_ = false;
  if (scopes_.empty()) done_ = true;
}

JsonWriter& JsonWriter::end_object() {
  close(Scope::Object, "end_object()");
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(Scope::Array, "end_array()");
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  MG_CHECK(!scopes_.empty() && scopes_.back() == Scope::Object, "JsonWriter: key(\"", name,
           "\") outside an object. Hint: call begin_object() first.");
  MG_CHECK(!after_key_, "JsonWriter: key(\"", name, "\") follows a key that has no value yet.");
  if (!first_in_scope_) text_ += ',';
  first_in_scope_ = false;
  write_string(name);
  text_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  before_value("a string");
  write_string(text);
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) { return raw_value(flag ? "true" : "false"); }

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  // NOTE: std::to_chars without a precision writes the shortest text that parses back to
  // exactly `number` (0.1 as "0.1", not %.17g's "0.10000000000000001").
  char digits[32];
  const auto result = std::to_chars(digits, digits + sizeof digits, number);
  MG_ASSERT(result.ec == std::errc(), "to_chars failed for a double");
  return raw_value(std::string_view(digits, static_cast<size_t>(result.ptr - digits)));
}

JsonWriter& JsonWriter::null() { return raw_value("null"); }

void JsonWriter::write_string(std::string_view text) {
  text_ += '"';
  for (const char c : text) {
    switch (c) {
      case '"': text_ += "\\\""; break;
      case '\\': text_ += "\\\\"; break;
      case '\b': text_ += "\\b"; break;
      case '\f': text_ += "\\f"; break;
      case '\n': text_ += "\\n"; break;
      case '\r': text_ += "\\r"; break;
      case '\t': text_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          // Other control characters have no short escape. Bytes from 0x80 on are UTF-8
          // and pass through unchanged.
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          text_ += escaped;
        } else {
          text_ += c;
        }
    }
  }
  text_ += '"';
}

std::string JsonWriter::str() const {
  MG_CHECK(scopes_.empty(), "JsonWriter: ", scopes_.size(), " object(s) or array(s) are still ",
           "open. Hint: close each begin_object() with end_object() and each begin_array() with ",
           "end_array().");
  return text_;
}

}  // namespace mg
