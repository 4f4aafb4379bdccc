// examples/common/cli.h — what the example programs share on their command lines: the
// `--flag value` / `--flag=value` loop, number and device parsing with messages that name
// the flag, and main()'s exit codes (0 done, 1 an error while running, printed as
// "error: ...", 2 a bad command line, printed with the usage).
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include <memgrad/core/device.h>

namespace examples {

// A mistake on the command line.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole of `text` as a number of type T, or a UsageError naming the flag.
template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw UsageError(flag + " expects a number, got '" + text + "'");
  }
  return value;
}

// An integer of at least `minimum`.
int64_t parse_count(const std::string& flag, const std::string& text, int64_t minimum = 1);
// A finite number > 0 (learning rates).
double parse_positive_real(const std::string& flag, const std::string& text);
// `text` unless it is empty (a file name).
std::string parse_file_name(const std::string& flag, const std::string& text);
// "cpu" or "cuda".
mg::Device parse_device(const std::string& text);

// What each flag that takes a value does with it, and each flag that takes none.
using FlagHandlers = std::map<std::string, std::function<void(const std::string&)>>;
using SwitchHandlers = std::map<std::string, std::function<void()>>;

// Runs the handlers for argv[1..]; throws UsageError for unknown flags and missing values.
// "--help"/"-h" is not handled here: list it among the switches.
void parse_flags(int argc, char** argv, const FlagHandlers& flags, const SwitchHandlers& switches = {});

// Applies --threads: OpenMP's and Eigen's thread counts.
void set_cpu_threads(int threads);

// main() of an example: parses with `parse` (which returns false for --help, after which
// the usage is printed), then calls `run`, turning exceptions into the exit codes above.
int run_main(int argc, char** argv, const std::string& default_name,
             const std::function<bool(int, char**)>& parse, const std::function<std::string(const std::string&)>& usage,
             const std::function<int()>& run);

}  // namespace examples
