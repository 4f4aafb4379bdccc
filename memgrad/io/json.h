// io/json.h — JsonWriter: builds one compact JSON text by streaming calls.
//
// Enough JSON for memgrad's machine-readable outputs (memory snapshots, the examples'
// --summary-json): objects, arrays, strings, integers, doubles and booleans. Strings are
// escaped as RFC 8259 requires; doubles are written in the shortest form that reads back
// to the same value, and NaN or infinity (which JSON cannot express) as null.
//
//   JsonWriter json;
//   json.begin_object().key("loss").value(0.25).key("epochs").value(3).end_object();
//   json.str();  // {"loss":0.25,"epochs":3}
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <vector>

namespace mg {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // Inside an object, every value (or nested object/array) follows a key.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  // NOTE: without this overload a string literal would pick value(bool) (a standard
  // conversion beats the user-defined one to std::string_view).
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(double number);
  template <std::integral Integer>
    requires(!std::same_as<Integer, bool>)
  JsonWriter& value(Integer number) {
    return raw_value(std::to_string(number));
  }
  JsonWriter& null();

  // The text written so far; checks that every object and array was closed.
  std::string str() const;

 private:
  enum class Scope { Object, Array };

  // Writes the separator the next value needs and checks that a value may come here.
  void before_value(const char* what);
  JsonWriter& raw_value(std::string_view text);
  void write_string(std::string_view text);
  void close(Scope scope, const char* what);

  std::string text_;
  std::vector<Scope> scopes_;
  bool first_in_scope_ = true;  // no comma needed before the next member or element
  bool after_key_ = false;      // a key was written and awaits its value
  bool done_ = false;           // the top-level value is complete
};

}  // namespace mg
