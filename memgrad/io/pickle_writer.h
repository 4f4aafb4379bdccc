// io/pickle_writer.h — PickleWriter: builds a Python pickle (protocol 2) of plain data by
// streaming calls, so that a Python program reads memgrad's output with pickle.load and
// no memgrad code (memory/pytorch_snapshot.h writes PyTorch's memory snapshot with it).
//
// Only what plain data needs: dicts, lists, str, int, float, bool and None. The opcodes
// build each container empty and fill it between a MARK and one SETITEMS or APPENDS, so
// nothing is memoized and the writer keeps no table (a reader's memo stays empty).
//
//   PickleWriter pickle;
//   pickle.begin_dict().key("size").value(512).key("frames").begin_list().end_list().end_dict();
//   pickle.bytes();  // pickle.loads(...) == {'size': 512, 'frames': []}
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mg {

class PickleWriter {
 public:
  PickleWriter();

  PickleWriter& begin_dict();
  PickleWriter& end_dict();
  PickleWriter& begin_list();
  PickleWriter& end_list();
  // Inside a dict, every value (or nested dict/list) follows a key.
  PickleWriter& key(std::string_view name);

  PickleWriter& value(std::string_view text);  // str (UTF-8)
  // NOTE: without this overload a string literal would pick value(bool).
  PickleWriter& value(const char* text) { return value(std::string_view(text)); }
  PickleWriter& value(bool flag);
  PickleWriter& value(double number);
  template <std::integral Integer>
    requires(!std::same_as<Integer, bool>)
  PickleWriter& value(Integer number) {
    // NOTE: an unsigned value above INT64_MAX is not plain data anywhere memgrad writes
    // pickles (sizes, addresses and times fit), so it goes through int64_t.
    return integer(static_cast<int64_t>(number));
  }
  PickleWriter& none();

  // The pickle: the written value and STOP; checks that every dict and list was closed and
  // that exactly one top-level value was written.
  std::string bytes() const;

 private:
  enum class Scope { Dict, List };

  // Checks that a value may come here (after a key inside a dict).
  void before_value(const char* what);
  // A top-level str, int, float, bool or None is the whole pickle.
  void after_scalar();
  void write_str(std::string_view text);
  PickleWriter& integer(int64_t number);
  void close(Scope scope, const char* what);

  std::string out_;
  std::vector<Scope> scopes_;
  bool after_key_ = false;  // a key was written and awaits its value
  bool done_ = false;       // the top-level value is complete
};

}  // namespace mg
