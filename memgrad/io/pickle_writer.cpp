// io/pickle_writer.cpp — the opcodes of pickle protocol 2 that plain data needs.
//
// NOTE: the opcodes (Python's Lib/pickletools.py documents each): PROTO 0x80 <version>,
// EMPTY_DICT '}', EMPTY_LIST ']', MARK '(', SETITEMS 'u' (pops key/value pairs down to the
// mark into the dict below it), APPENDS 'e' (likewise for a list), BINUNICODE 'X' <uint32
// little-endian length> <UTF-8>, BININT 'J' <int32 little-endian>, LONG1 0x8a <length>
// <two's complement little-endian>, BINFLOAT 'G' <IEEE 754 double, big-endian>, NEWTRUE
// 0x88, NEWFALSE 0x89, NONE 'N', STOP '.'.
#include "memgrad/io/pickle_writer.h"

#include <bit>
#include <cstring>
#include <limits>

#include "memgrad/core/error.h"

namespace mg {

namespace {

void append_little_endian(std::string& out, uint64_t value, int count) {
  for (int i = 0; i < count; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

PickleWriter::PickleWriter() {
  out_ += '\x80';  // PROTO 2: readable by every Python 3
  out_ += '\x02';
}

void PickleWriter::before_value(const char* what) {
  MG_ASSERT(!done_, "PickleWriter: ", what, " after the top-level value was complete");
  if (!scopes_.empty() && scopes_.back() == Scope::Dict) {
    MG_ASSERT(after_key_, "PickleWriter: ", what, " inside a dict needs a key first");
  }
  after_key_ = false;
}

void PickleWriter::after_scalar() {
  if (scopes_.empty()) done_ = true;  // a container is complete when it closes
}

void PickleWriter::write_str(std::string_view text) {
  MG_CHECK(text.size() <= std::numeric_limits<uint32_t>::max(), "PickleWriter: a string of ", text.size(),
           " bytes is longer than protocol 2 can hold (4 GiB).");
  out_ += 'X';
  append_little_endian(out_, text.size(), 4);
  out_.append(text.data(), text.size());
}

PickleWriter& PickleWriter::begin_dict() {
  before_value("a dict");
  out_ += "}(";  // EMPTY_DICT, MARK
  scopes_.push_back(Scope::Dict);
  return *this;
}

PickleWriter& PickleWriter::begin_list() {
  before_value("a list");
  out_ += "](";  // EMPTY_LIST, MARK
  scopes_.push_back(Scope::List);
  return *this;
}

void PickleWriter::close(Scope scope, const char* what) {
  MG_ASSERT(!scopes_.empty() && scopes_.back() == scope, "PickleWriter: ", what, " without its begin");
  MG_ASSERT(!after_key_, "PickleWriter: ", what, " right after a key, which has no value");
  scopes_.pop_back();
  if (scopes_.empty()) done_ = true;
}

PickleWriter& PickleWriter::end_dict() {
  close(Scope::Dict, "end_dict");
  out_ += 'u';  // SETITEMS
  return *this;
}

PickleWriter& PickleWriter::end_list() {
  close(Scope::List, "end_list");
  out_ += 'e';  // APPENDS
  return *this;
}

PickleWriter& PickleWriter::key(std::string_view name) {
  MG_ASSERT(!scopes_.empty() && scopes_.back() == Scope::Dict && !after_key_,
            "PickleWriter: key('", name, "') outside a dict or right after another key");
  write_str(name);  // a key is a str pushed before its value
  after_key_ = true;
  return *this;
}

PickleWriter& PickleWriter::value(std::string_view text) {
  before_value("a str");
  write_str(text);
  after_scalar();
  return *this;
}

PickleWriter& PickleWriter::value(bool flag) {
  before_value("a bool");
  out_ += flag ? '\x88' : '\x89';
  after_scalar();
  return *this;
}

PickleWriter& PickleWriter::value(double number) {
  before_value("a float");
  out_ += 'G';
  const auto bits = std::bit_cast<uint64_t>(number);
  for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  after_scalar();
  return *this;
}

PickleWriter& PickleWriter::integer(int64_t number) {
  before_value("an int");
  if (number >= std::numeric_limits<int32_t>::min() && number <= std::numeric_limits<int32_t>::max()) {
    out_ += 'J';
    append_little_endian(out_, static_cast<uint64_t>(number), 4);
  } else {
    out_ += '\x8a';  // LONG1: 8 bytes of two's complement hold any int64
    out_ += '\x08';
    append_little_endian(out_, static_cast<uint64_t>(number), 8);
  }
  after_scalar();
  return *this;
}

PickleWriter& PickleWriter::none() {
  before_value("None");
  out_ += 'N';
  after_scalar();
  return *this;
}

std::string PickleWriter::bytes() const {
  MG_ASSERT(done_ && scopes_.empty(), "PickleWriter::bytes: the value is incomplete (",
            scopes_.size(), " dicts or lists still open)");
  return out_ + '.';
}

}  // namespace mg
