// tests/io/test_pickle_writer.cpp — PickleWriter's bytes, opcode by opcode (Python's
// pickle.loads reads them: tests/memory/recording/check_memory_exports.py reads a whole
// memory snapshot), and its refusal of a malformed value.
#include <catch2/catch.hpp>

#include <string>

#include "memgrad/core/error.h"
#include "memgrad/io/pickle_writer.h"

namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int value : values) out += static_cast<char>(value);
  return out;
}

}  // namespace

TEST_CASE("PickleWriter writes protocol 2 opcodes for dicts, lists, str, int, float, bool and None", "[io][pickle]") {
  mg::PickleWriter pickle;
  pickle.begin_dict()
      .key("a").value(1)
      .key("b").begin_list().value(-2).value(int64_t{1} << 40).value(true).value(false).none().end_list()
      .key("c").value(0.5)
      .end_dict();
  // pickle.loads(...) == {'a': 1, 'b': [-2, 2**40, True, False, None], 'c': 0.5}
  const std::string expected =
      bytes_of({0x80, 2, '}', '('}) +
      bytes_of({'X', 1, 0, 0, 0, 'a'}) + bytes_of({'J', 1, 0, 0, 0}) +
      bytes_of({'X', 1, 0, 0, 0, 'b'}) + bytes_of({']', '('}) +
      bytes_of({'J', 0xfe, 0xff, 0xff, 0xff}) +                     // -2, int32 little-endian
      bytes_of({0x8a, 8, 0, 0, 0, 0, 0, 1, 0, 0}) +               // 2**40, LONG1 of 8 bytes
      bytes_of({0x88, 0x89, 'N', 'e'}) +                           // True, False, None, APPENDS
      bytes_of({'X', 1, 0, 0, 0, 'c'}) +
      bytes_of({'G', 0x3f, 0xe0, 0, 0, 0, 0, 0, 0}) +              // 0.5, big-endian double
      bytes_of({'u', '.'});                                         // SETITEMS, STOP
  CHECK(pickle.bytes() == expected);
}

TEST_CASE("PickleWriter refuses a value without its key and an unclosed container", "[io][pickle]") {
  mg::PickleWriter missing_key;
  missing_key.begin_dict();
  CHECK_THROWS_AS(missing_key.value(1), mg::Error);
  mg::PickleWriter open_list;
  open_list.begin_list().value("x");
  CHECK_THROWS_AS(open_list.bytes(), mg::Error);
}
