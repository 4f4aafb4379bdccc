// examples/memory_lab/args.h — the memory_lab program's command line: flags, defaults, usage.
#pragma once

#include <string>

#include <memgrad/core/device.h>

namespace memory_lab {

struct Args {
  mg::Device device = mg::Device::cpu();
  std::string experiment;  // empty: every experiment
  std::string json;        // empty: no JSON file
  bool list = false;
  bool help = false;
};

// Throws examples::UsageError for unknown flags, missing values and unknown experiments.
Args parse_args(int argc, char** argv);

std::string usage(const std::string& program);

}  // namespace memory_lab
