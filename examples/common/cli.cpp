// examples/common/cli.cpp — the shared command-line loop, parsers, typo suggestions, the
// refusal of ignored flags and main() wrapper.
#include "examples/common/cli.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

namespace examples {
namespace {

// The edits that turn `a` into `b`: insertions, deletions, substitutions and swaps of two
// neighbouring letters, one each (the optimal string alignment distance: a swap is the
// commonest typo, "--stpes").
size_t edit_distance(const std::string& a, const std::string& b) {
  // distance[i][j]: between a's first i letters and b's first j.
  std::vector<std::vector<size_t>> distance(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) distance[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) distance[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      distance[i][j] = std::min({distance[i - 1][j] + 1, distance[i][j - 1] + 1,
                                 distance[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        distance[i][j] = std::min(distance[i][j], distance[i - 2][j - 2] + 1);
      }
    }
  }
  return distance[a.size()][b.size()];
}

std::string without_dashes(const std::string& flag) {
  const size_t start = flag.find_first_not_of('-');
  return start == std::string::npos ? std::string() : flag.substr(start);
}

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " and " : ", ";
    text += names[i];
  }
  return text;
}

std::string unknown_flag_message(const std::string& flag, const FlagHandlers& flags, const SwitchHandlers& switches) {
  std::vector<std::string> known;
  for (const auto& [name, handler] : flags) known.push_back(name);
  for (const auto& [name, handler] : switches) known.push_back(name);
  const bool looks_like_flag = flag.rfind("--", 0) == 0;
  std::string message = looks_like_flag ? "unknown flag '" + flag + "'" : "unexpected argument '" + flag + "'";
  if (const std::optional<std::string> nearest = suggest_flag(flag, known)) message += "; did you mean " + *nearest + "?";
  return message;
}

}  // namespace

int64_t parse_count(const std::string& flag, const std::string& text, int64_t minimum) {
  const auto value = parse_number<int64_t>(flag, text);
  if (value < minimum) throw UsageError(flag + " must be at least " + std::to_string(minimum) + ", got " + text);
  return value;
}

std::string parse_file_name(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + " needs a file name");
  return text;
}

double parse_positive_real(const std::string& flag, const std::string& text) {
  const auto value = parse_number<double>(flag, text);
  if (!(value > 0) || !std::isfinite(value)) throw UsageError(flag + " must be a positive number, got " + text);
  return value;
}

mg::Device parse_device(const std::string& text) {
  if (text == "cpu") return mg::Device::cpu();
  if (text == "cuda") return mg::Device::cuda();
  throw UsageError("--device must be cpu or cuda, got '" + text + "'");
}

void GivenFlags::add(const std::string& flag) {
  if (!has(flag)) flags_.push_back(flag);
}

bool GivenFlags::has(const std::string& flag) const {
  return std::find(flags_.begin(), flags_.end(), flag) != flags_.end();
}

std::vector<std::string> GivenFlags::among(const std::vector<std::string>& flags) const {
  std::vector<std::string> given;
  for (const std::string& flag : flags) {
    if (has(flag)) given.push_back(flag);
  }
  return given;
}

std::optional<std::string> suggest_flag(const std::string& unknown, const std::vector<std::string>& known) {
  const std::string word = without_dashes(unknown);
  if (word.empty()) return std::nullopt;
  // NOTE: the dashes are left out of the distance, so that "-batch" and "batch" find
  // "--batch"; a typo is taken to change at most a third of the word (and at least 1).
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> nearest;
  size_t nearest_distance = allowed + 1;
  std::vector<std::string> extended;  // known flags that `word` begins
  for (const std::string& flag : known) {
    if (flag.rfind("--", 0) != 0) continue;  // -h
    const std::string name = without_dashes(flag);
    if (name.rfind(word, 0) == 0) extended.push_back(flag);
    const size_t distance = edit_distance(word, name);
    if (distance < nearest_distance) {
      nearest = flag;
      nearest_distance = distance;
    }
  }
  if (nearest) return nearest;
  if (extended.size() == 1) return extended.front();
  return std::nullopt;
}

GivenFlags parse_flags(int argc, char** argv, const FlagHandlers& flags, const SwitchHandlers& switches) {
  GivenFlags given;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (const auto found = switches.find(flag); found != switches.end()) {
      const auto with_value = flags.find(flag);
      if (with_value != flags.end() && i + 1 < argc && argv[i + 1][0] != '-') {
        with_value->second(argv[++i]);
      } else {
        found->second();
      }
      given.add(flag);
      continue;
    }
    std::optional<std::string> value;
    if (const size_t equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    const auto handler = flags.find(flag);
    if (handler == flags.end()) {
      if (switches.count(flag) != 0) throw UsageError(flag + " takes no value, got '" + *value + "'");
      throw UsageError(unknown_flag_message(flag, flags, switches));
    }
    if (!value) {
      if (i + 1 == argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    handler->second(*value);
    given.add(flag);
  }
  return given;
}

void refuse_ignored_flags(const GivenFlags& given, const std::vector<IgnoredFlags>& rows) {
  for (const IgnoredFlags& row : rows) {
    if (!row.applies) continue;
    const std::vector<std::string> ignored = given.among(row.flags);
    if (ignored.empty()) continue;
    throw UsageError(joined(ignored) + (ignored.size() == 1 ? " does" : " do") + " nothing " + row.context);
  }
}

void set_cpu_threads(int threads) {
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

int run_main(int argc, char** argv, const std::string& default_name, const std::function<bool(int, char**)>& parse,
             const std::function<std::string(const std::string&)>& usage, const std::function<int()>& run) {
  const std::string program =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : default_name;
  try {
    if (!parse(argc, argv)) {
      std::cout << usage(program);
      return 0;
    }
  } catch (const UsageError& error) {
    // NOTE: one line, not the usage: the mistake stays on the screen (the usage is 40 to
    // 90 lines that would scroll it away), and --help is one word away.
    std::cerr << program << ": " << error.what() << " (" << program << " --help lists the flags)\n";
    return 2;
  }
  try {
    return run();
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << '\n';
    return 1;
  }
}

}  // namespace examples
