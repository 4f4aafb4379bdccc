// examples/common/cli.cpp — the shared command-line loop, parsers and main() wrapper.
#include "examples/common/cli.h"

#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

namespace examples {

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

void parse_flags(int argc, char** argv, const FlagHandlers& flags, const SwitchHandlers& switches) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (const auto found = switches.find(flag); found != switches.end()) {
      found->second();
      continue;
    }
    std::optional<std::string> value;
    if (const size_t equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    const auto handler = flags.find(flag);
    if (handler == flags.end()) {
      throw UsageError(flag.rfind("--", 0) == 0 ? "unknown flag '" + flag + "'"
                                                : "unexpected argument '" + flag + "'");
    }
    if (!value) {
      if (i + 1 == argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    handler->second(*value);
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
    std::cerr << program << ": " << error.what() << "\n\n" << usage(program);
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
