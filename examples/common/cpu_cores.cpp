// examples/common/cpu_cores.cpp — counting physical cores from sysfs and the affinity mask.
#include "examples/common/cpu_cores.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace examples {
namespace {

int parse_cpu_number(const std::string& text, const std::string& list) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("not a cpu list: '" + list + "'");
  }
  return std::stoi(text);
}

// The CPUs this process may run on; empty when the mask cannot be read.
std::vector<int> allowed_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::string list = text;
  list.erase(std::remove_if(list.begin(), list.end(), [](char c) { return c == '\n' || c == ' '; }), list.end());
  std::vector<int> cpus;
  std::stringstream ranges(list);
  for (std::string range; std::getline(ranges, range, ',');) {
    const size_t dash = range.find('-');
    const int first = parse_cpu_number(range.substr(0, dash), text);
    const int last = dash == std::string::npos ? first : parse_cpu_number(range.substr(dash + 1), text);
    if (last < first) throw std::invalid_argument("not a cpu list: '" + text + "'");
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  if (cpus.empty()) throw std::invalid_argument("an empty cpu list");
  return cpus;
}

std::optional<int> count_physical_cores(const std::filesystem::path& cpu_folder, const std::vector<int>& cpus) {
  std::set<std::vector<int>> cores;  // each core as the CPUs that share it
  for (const int cpu : cpus) {
    const std::filesystem::path topology = cpu_folder / ("cpu" + std::to_string(cpu)) / "topology";
    std::ifstream file(topology / "core_cpus_list");
    if (!file) file.open(topology / "thread_siblings_list");
    std::string list;
    if (!std::getline(file, list)) return std::nullopt;
    try {
      cores.insert(parse_cpu_list(list));
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  }
  if (cores.empty()) return std::nullopt;
  return static_cast<int>(cores.size());
}

int physical_cores() {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) return std::max(1u, std::thread::hardware_concurrency());
  return count_physical_cores("/sys/devices/system/cpu", cpus).value_or(static_cast<int>(cpus.size()));
}

std::optional<int> default_cpu_threads() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return std::nullopt;
  return physical_cores();
}

std::string threads_usage() {
  return "  --threads N              CPU threads (default: the physical cores this process may run\n"
         "                           on, as PyTorch: " + std::to_string(physical_cores()) +
         " here; OMP_NUM_THREADS instead when it is\n"
         "                           set; per rank when distributed)\n";
}

}  // namespace examples
