// core/error.h — the two kinds of error memgrad raises.
//
// MG_CHECK(cond, parts...) is for a user's mistake: it throws mg::Error whose message is
// the parts streamed together (name the shapes, dtypes, devices involved and give a hint).
// MG_ASSERT(cond, parts...) guards internal invariants: a failure is a memgrad bug, so the
// message carries the file and line. Library code never exits or aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when an allocator's backend cannot supply memory even after freeing its cache.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream stream;
  (stream << ... << parts);
  return stream.str();
}

[[noreturn]] void throw_error(std::string message);
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition,
                                       std::string message);

}  // namespace detail
}  // namespace mg

#define MG_CHECK(cond, ...)                                                  \
  do {                                                                       \
    if (!(cond)) [[unlikely]]                                                \
      ::mg::detail::throw_error(::mg::detail::str_cat(__VA_ARGS__));         \
  } while (0)

#define MG_ASSERT(cond, ...)                                                 \
  do {                                                                       \
    if (!(cond)) [[unlikely]]                                                \
      ::mg::detail::throw_internal_error(__FILE__, __LINE__, #cond,          \
                                         ::mg::detail::str_cat(__VA_ARGS__)); \
  } while (0)
