// examples/common/cli.h — what the example programs share on their command lines: the
// `--flag value` / `--flag=value` loop, number and device parsing with messages that name
// the flag, the refusal of flags that would do nothing in the mode asked for, and main()'s
// exit codes (0 done, 1 an error while running, printed as "error: ...", 2 a bad command
// line, printed as one line: the program, the mistake, and a pointer to --help).
//
// NOTE (2026-12-07): we keep this small parser rather than take Debian's libcli11-dev:
// the examples need only flags with values and switches, its error texts are tested, and
// CLI11 would be one more package for every user and for the GPU machine (which has no
// package registry). What CLI11 would have given, an unknown flag's nearest known flag,
// is a few lines here (suggest_flag).
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

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

// The flags a command line gave, by name ("--batch"), whether or not their value equals
// the default: what the checks of combinations ask.
class GivenFlags {
 public:
  void add(const std::string& flag);
  bool has(const std::string& flag) const;
  // Those of `flags` that were given, in the order of `flags`.
  std::vector<std::string> among(const std::vector<std::string>& flags) const;

 private:
  std::vector<std::string> flags_;
};

// Runs the handlers for argv[1..] and returns the flags given; throws UsageError for
// unknown flags (naming the nearest known one), missing values and a value given to a
// switch. "--help"/"-h" is not handled here: list it among the switches. A flag listed in
// both maps has an optional value (--checkpoint, --checkpoint selective): the next word is
// its value unless it starts with '-' or there is none.
GivenFlags parse_flags(int argc, char** argv, const FlagHandlers& flags, const SwitchHandlers& switches = {});

// The known flag nearest to `unknown` by edit distance (or the one it is a prefix of),
// if one is near enough to be a likely typo; nullopt otherwise.
std::optional<std::string> suggest_flag(const std::string& unknown, const std::vector<std::string>& known);

// One row of a program's table of flags that do nothing in a mode: when `applies`, none
// of `flags` may be given; `context` ends the message ("with --bench: it times ...").
struct IgnoredFlags {
  bool applies;
  std::vector<std::string> flags;
  std::string context;
};

// Throws UsageError "--save and --resume do nothing <context>" for the first row that
// applies and whose flags were given (naming every given one of them).
void refuse_ignored_flags(const GivenFlags& given, const std::vector<IgnoredFlags>& rows);

// Applies --threads: OpenMP's and Eigen's thread counts.
void set_cpu_threads(int threads);

// main() of an example: parses with `parse` (which returns false for --help, after which
// the usage is printed), then calls `run`, turning exceptions into the exit codes above.
int run_main(int argc, char** argv, const std::string& default_name,
             const std::function<bool(int, char**)>& parse, const std::function<std::string(const std::string&)>& usage,
             const std::function<int()>& run);

}  // namespace examples
