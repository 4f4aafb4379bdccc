// io/json_parse.cpp — the strict recursive-descent JSON reader behind parse_json.
#include "memgrad/io/json_parse.h"

#include <limits>
#include <unordered_set>

#include "memgrad/core/error.h"

namespace mg {

namespace {

// Deep enough for any real header; shallow enough that "[[[[..." cannot overflow the stack.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view text, std::string_view context) : text_(text), context_(context) {}

  JsonValue parse_document() {
    JsonValue value = parse_value(0);
    skip_whitespace();
    if (position_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw Error(detail::str_cat(context_, ": malformed JSON at byte ", position_, ": ", what));
  }

  void skip_whitespace() {
    while (position_ < text_.size()) {
      char c = text_[position_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++position_;
    }
  }

  // The next character after whitespace, without consuming it; fails at the end.
  char peek(std::string_view expected) {
    skip_whitespace();
    if (position_ >= text_.size()) fail(detail::str_cat("the text ends where ", expected, " was expected"));
    return text_[position_];
  }

  void expect(char c, std::string_view expected) {
    if (peek(expected) != c) fail(detail::str_cat("expected ", expected));
    ++position_;
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail(detail::str_cat("nested deeper than ", kMaxDepth, " levels"));
    char c = peek("a value");
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      JsonValue value;
      value.kind = JsonValue::Kind::String;
      value.string = parse_string();
      return value;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer();
    fail("expected an object, array, string or integer (nothing else belongs in this header)");
  }

  JsonValue parse_object(int depth) {
    JsonValue value;
    value.kind = JsonValue::Kind::Object;
    ++position_;  // '{'
    if (peek("a key or '}'") == '}') {
      ++position_;
      return value;
    }
    std::unordered_set<std::string> keys;
    while (true) {
      if (peek("a key") != '"') fail("expected a string key");
      size_t key_position = position_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        position_ = key_position;
        fail(detail::str_cat("the key \"", key, "\" appears twice in one object"));
      }
      expect(':', "':' after a key");
      JsonValue member = parse_value(depth + 1);
      value.members.push_back({std::move(key), std::move(member)});
      char next = peek("',' or '}'");
      ++position_;
      if (next == '}') return value;
      if (next != ',') {
        --position_;
        fail("expected ',' or '}' in an object");
      }
    }
  }

  JsonValue parse_array(int depth) {
    JsonValue value;
    value.kind = JsonValue::Kind::Array;
    ++position_;  // '['
    if (peek("a value or ']'") == ']') {
      ++position_;
      return value;
    }
    while (true) {
      value.elements.push_back(parse_value(depth + 1));
      char next = peek("',' or ']'");
      ++position_;
      if (next == ']') return value;
      if (next != ',') {
        --position_;
        fail("expected ',' or ']' in an array");
      }
    }
  }

  JsonValue parse_integer() {
    JsonValue value;
    value.kind = JsonValue::Kind::Integer;
    bool negative = text_[position_] == '-';
    if (negative) ++position_;
    size_t first_digit = position_;
    // Accumulate as a negative number: its range holds INT64_MIN too.
    int64_t accumulated = 0;
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') {
      int digit = text_[position_] - '0';
      if (accumulated < (std::numeric_limits<int64_t>::min() + digit) / 10) {
        fail("integer out of the 64-bit range");
      }
      accumulated = accumulated * 10 - digit;
      ++position_;
    }
    size_t digits = position_ - first_digit;
    if (digits == 0) fail("expected digits after '-'");
    if (digits > 1 && text_[first_digit] == '0') fail("integers may not have leading zeros");
    if (position_ < text_.size() &&
        (text_[position_] == '.' || text_[position_] == 'e' || text_[position_] == 'E')) {
      fail("only integers are expected here, not fractions or exponents");
    }
    if (!negative && accumulated == std::numeric_limits<int64_t>::min()) {
      fail("integer out of the 64-bit range");
    }
    value.integer = negative ? accumulated : -accumulated;
    return value;
  }

  uint32_t parse_hex4() {
    if (text_.size() - position_ < 4) fail("\\u needs four hex digits");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[position_++];
      code <<= 4;
      if (c >= '0' && c <= '9') code |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') code |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') code |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("\\u needs four hex digits");
    }
    return code;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string parse_string() {
    ++position_;  // '"'
    std::string result;
    while (true) {
      if (position_ >= text_.size()) fail("unterminated string");
      char c = text_[position_++];
      if (c == '"') return result;
      if (static_cast<unsigned char>(c) < 0x20) {
        --position_;
        fail("control character inside a string (it must be escaped)");
      }
      if (c != '\\') {
        result += c;
        continue;
      }
      if (position_ >= text_.size()) fail("unterminated escape");
      char escape = text_[position_++];
      switch (escape) {
        case '"': result += '"'; break;
        case '\\': result += '\\'; break;
        case '/': result += '/'; break;
        case 'b': result += '\b'; break;
        case 'f': result += '\f'; break;
        case 'n': result += '\n'; break;
        case 'r': result += '\r'; break;
        case 't': result += '\t'; break;
        case 'u': {
          uint32_t code = parse_hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) fail("a low surrogate without a high one");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(position_, 2) != "\\u") fail("a high surrogate without a low one");
            position_ += 2;
            uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate without a low one");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(result, code);
          break;
        }
        default:
          --position_;
          fail(detail::str_cat("unknown escape \\", escape));
      }
    }
  }

  std::string_view text_;
  std::string_view context_;
  size_t position_ = 0;
};

}  // namespace

const char* json_kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::Object: return "an object";
    case JsonValue::Kind::Array: return "an array";
    case JsonValue::Kind::String: return "a string";
    case JsonValue::Kind::Integer: return "an integer";
  }
  return "a value";
}

JsonValue parse_json(std::string_view text, std::string_view context) {
  return Parser(text, context).parse_document();
}

}  // namespace mg
