// tests/examples/test_cli_common.cpp — the pieces of examples/common that every program's
// command line uses, called directly: the nearest known flag to a typo, the table of flags
// a mode ignores, the output-path check (every reason a path is refused, and that the
// check leaves the folder as it found it), the physical-core count read from a sysfs tree
// made by hand, and the memory figures of the progress line.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/mnist_test_files.h"
#include "examples/common/cli.h"
#include "examples/common/cpu_cores.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/output_path.h"
#include "examples/common/progress.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using examples::UsageError;
using mg_test::TempDir;

namespace {

// argv for parse_flags: the program's name, then `arguments`.
struct CommandLine {
  explicit CommandLine(std::vector<std::string> arguments) : words(std::move(arguments)) {
    words.insert(words.begin(), "program");
    for (std::string& word : words) pointers.push_back(word.data());
  }
  int argc() const { return static_cast<int>(pointers.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> words;
  std::vector<char*> pointers;
};

std::string usage_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  FAIL("no UsageError");
  return "";
}

std::vector<std::string> folder_listing(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("suggest_flag names the known flag a typo is nearest to, and none for a word far from all", "[examples][cli]") {
  const std::vector<std::string> known = {"--batch", "--epochs", "--predict-memory", "--memory-timeline", "--lr",
                                          "--help", "-h"};
  CHECK(examples::suggest_flag("--batches", known) == "--batch");   // two letters more
  CHECK(examples::suggest_flag("--epoch", known) == "--epochs");    // one fewer
  CHECK(examples::suggest_flag("--epcohs", known) == "--epochs");   // two letters swapped: one edit
  CHECK(examples::suggest_flag("--lrr", known) == "--lr");
  CHECK(examples::suggest_flag("-batch", known) == "--batch");      // one dash
  CHECK(examples::suggest_flag("batch", known) == "--batch");       // none
  CHECK(examples::suggest_flag("--predict", known) == "--predict-memory");  // the only flag it begins
  CHECK(examples::suggest_flag("--memory", known) == "--memory-timeline");
  CHECK(examples::suggest_flag("--bogus", known) == std::nullopt);
  CHECK(examples::suggest_flag("--frobnicate", known) == std::nullopt);
  CHECK(examples::suggest_flag("--", known) == std::nullopt);
  CHECK(examples::suggest_flag("--h", known) == "--help");  // -h is never offered
}

TEST_CASE("parse_flags records the flags given and refuses unknown flags and values given to switches", "[examples][cli]") {
  int64_t batch = 0;
  bool bench = false;
  const examples::FlagHandlers flags = {{"--batch", [&](const std::string& v) { batch = examples::parse_count("--batch", v); }},
                                        {"--save", [](const std::string&) {}}};
  const examples::SwitchHandlers switches = {{"--bench", [&] { bench = true; }}};
  CommandLine line({"--batch=8", "--bench", "--batch", "16"});
  const examples::GivenFlags given = examples::parse_flags(line.argc(), line.argv(), flags, switches);
  CHECK(batch == 16);
  CHECK(bench);
  CHECK(given.has("--batch"));
  CHECK(given.has("--bench"));
  CHECK_FALSE(given.has("--save"));
  CHECK(given.among({"--save", "--bench", "--batch"}) == std::vector<std::string>{"--bench", "--batch"});

  CommandLine typo({"--batchs", "4"});
  CHECK(usage_error_of([&] { examples::parse_flags(typo.argc(), typo.argv(), flags, switches); }) ==
        "unknown flag '--batchs'; did you mean --batch?");
  CommandLine stray({"model.safetensors"});
  CHECK(usage_error_of([&] { examples::parse_flags(stray.argc(), stray.argv(), flags, switches); }) ==
        "unexpected argument 'model.safetensors'");
  CommandLine valued({"--bench=yes"});
  CHECK(usage_error_of([&] { examples::parse_flags(valued.argc(), valued.argv(), flags, switches); }) ==
        "--bench takes no value, got 'yes'");
}

TEST_CASE("refuse_ignored_flags names every ignored flag of the first row that applies", "[examples][cli]") {
  const examples::FlagHandlers flags = {{"--save", [](const std::string&) {}}, {"--lr", [](const std::string&) {}},
                                        {"--data", [](const std::string&) {}}};
  CommandLine line({"--save", "m", "--lr", "0.1"});
  const examples::GivenFlags given = examples::parse_flags(line.argc(), line.argv(), flags);
  const std::vector<examples::IgnoredFlags> rows = {
      {false, {"--save"}, "in a mode not asked for"},
      {true, {"--data", "--lr", "--save"}, "with --bench: it trains nothing"},
      {true, {"--save"}, "a later row"},
  };
  CHECK(usage_error_of([&] { examples::refuse_ignored_flags(given, rows); }) ==
        "--lr and --save do nothing with --bench: it trains nothing");
  CHECK_NOTHROW(examples::refuse_ignored_flags(given, {{true, {"--data"}, "unused"}, {false, {"--save"}, "off"}}));
  CommandLine three({"--save", "m", "--lr", "0.1", "--data", "d"});
  const examples::GivenFlags all = examples::parse_flags(three.argc(), three.argv(), flags);
  CHECK(usage_error_of([&] { examples::refuse_ignored_flags(all, {rows[1]}); }) ==
        "--data, --lr and --save do nothing with --bench: it trains nothing");
}

TEST_CASE("check_output_path refuses a missing folder, a folder, a device and an unwritable folder", "[examples][cli]") {
  TempDir dir("output-path");
  const std::string missing = dir.file("no-such-folder") + "/summary.json";
  CHECK(usage_error_of([&] { examples::check_output_path("--summary-json", missing); }) ==
        "--summary-json '" + missing + "': no such folder '" + dir.file("no-such-folder") + "'");
  CHECK(usage_error_of([&] { examples::check_output_path("--save", dir.path.string()); }) ==
        "--save '" + dir.path.string() + "' is a folder; give a file name in it");
  CHECK_THAT(usage_error_of([&] { examples::check_output_path("--save", dir.file("sub") + "/"); }),
             Contains("ends with '/'; give a file name"));
  std::ofstream(dir.file("plain")) << "a file, not a folder";
  CHECK(usage_error_of([&] { examples::check_output_path("--save", dir.file("plain") + "/model"); }) ==
        "--save '" + dir.file("plain") + "/model': '" + dir.file("plain") + "' is not a folder");
  CHECK_THAT(usage_error_of([&] { examples::check_output_path("--memory-timeline", "/dev/null"); }),
             Contains("--memory-timeline '/dev/null' exists and is not a regular file"));
  CHECK(usage_error_of([&] { examples::check_output_path("--json", ""); }) == "--json needs a file name");
  // sysfs refuses new files even to root; a folder without write permission refuses them
  // to everyone else.
  if (std::filesystem::is_directory("/sys")) {
    CHECK(usage_error_of([&] { examples::check_output_path("--save", "/sys/model.safetensors"); }) ==
          "--save '/sys/model.safetensors' cannot be written: permission denied in folder '/sys'");
  }
  if (geteuid() != 0) {
    std::filesystem::create_directories(dir.path / "locked");
    chmod(dir.file("locked").c_str(), 0555);
    CHECK_THAT(usage_error_of([&] { examples::check_output_path("--save", dir.file("locked") + "/m"); }),
               Contains("permission denied"));
    chmod(dir.file("locked").c_str(), 0755);
  }
}

TEST_CASE("check_output_path accepts a new or existing file and leaves the folder as it was", "[examples][cli]") {
  TempDir dir("output-path");
  std::ofstream(dir.file("existing.json")) << "kept";
  const std::vector<std::string> before = folder_listing(dir.path);
  examples::check_output_path("--summary-json", dir.file("existing.json"));
  examples::check_output_path("--save", dir.file("new.safetensors"));
  CHECK(folder_listing(dir.path) == before);  // no probe left, no target created
  CHECK(mg_test::read_file(dir.file("existing.json")) == "kept");
  // A bare file name is in the current folder.
  CHECK_NOTHROW(examples::check_output_path("--json", "memgrad-probe-test.json"));
  CHECK_FALSE(std::filesystem::exists("memgrad-probe-test.json"));
}

TEST_CASE("check_output_paths refuses two flags that name one file", "[examples][cli]") {
  TempDir dir("output-path");
  CHECK(usage_error_of([&] {
          examples::check_output_paths({{"--save", dir.file("m")}, {"--summary-json", ""}, {"--save-init", dir.file("m")}});
        }) == "--save and --save-init name the same file '" + dir.file("m") + "'");
  CHECK_THAT(usage_error_of([&] {
               examples::check_output_paths({{"--save", dir.file("m")}, {"--summary-json", dir.path.string() + "/./m"}});
             }),
             Contains("--save and --summary-json name the same file"));
  CHECK_NOTHROW(examples::check_output_paths({{"--save", dir.file("a")}, {"--summary-json", dir.file("b")}}));
}

TEST_CASE("parse_bytes reads counts, units and fractions of a unit, and refuses the rest", "[examples][cli]") {
  using examples::parse_bytes;
  CHECK(parse_bytes("--memory-budget", "1073741824") == int64_t{1} << 30);
  CHECK(parse_bytes("--memory-budget", "24GiB") == int64_t{24} << 30);
  CHECK(parse_bytes("--memory-budget", "2GB") == 2'000'000'000);
  CHECK(parse_bytes("--memory-budget", "2.5GiB") == int64_t{5} << 29);
  CHECK(parse_bytes("--memory-budget", "0.5KiB") == 512);
  CHECK(parse_bytes("--memory-budget", "1.0000000001KiB") == 1024);  // rounded down to a whole byte
  for (const std::string bad : {"1.5B", "1.5", "2.GiB", ".5GiB", "1..5GiB", "-1GiB", "0GiB", "0.0001B", "0.0000001KiB",
                                "lots", "GiB", "5000000000TiB", "4294967296.5TiB"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_bytes("--memory-budget", bad), examples::UsageError);
  }
}

TEST_CASE("parse_cpu_list reads Linux cpu lists", "[examples][cli]") {
  CHECK(examples::parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(examples::parse_cpu_list("5") == std::vector<int>{5});
  CHECK_THROWS_AS(examples::parse_cpu_list("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(examples::parse_cpu_list("a-b"), std::invalid_argument);
  CHECK_THROWS_AS(examples::parse_cpu_list(""), std::invalid_argument);
}

TEST_CASE("count_physical_cores counts each core once among the CPUs a process may use", "[examples][cli]") {
  // Two sockets of two cores with two hyper-threads each, numbered as Linux numbers them on
  // x86: cpu0-3 are the first thread of each core, cpu4-7 their siblings (so core 0 of
  // socket 0 is "0,4"). 8 logical CPUs, 4 cores.
  TempDir dir("cpu-topology");
  const std::vector<std::string> siblings = {"0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7"};
  for (size_t cpu = 0; cpu < siblings.size(); ++cpu) {
    const std::filesystem::path topology = dir.path / ("cpu" + std::to_string(cpu)) / "topology";
    std::filesystem::create_directories(topology);
    // Older kernels have only thread_siblings_list: cpu7 has only that one.
    std::ofstream(topology / (cpu == 7 ? "thread_siblings_list" : "core_cpus_list")) << siblings[cpu] << "\n";
  }
  CHECK(examples::count_physical_cores(dir.path, {0, 1, 2, 3, 4, 5, 6, 7}) == 4);
  CHECK(examples::count_physical_cores(dir.path, {0, 4}) == 1);        // one core's two threads
  CHECK(examples::count_physical_cores(dir.path, {0, 1, 4, 7}) == 3);  // taskset -c 0,1,4,7
  CHECK(examples::count_physical_cores(dir.path, {0, 9}) == std::nullopt);  // no cpu9: unknown
  // This machine: at least one core, and no more than its logical CPUs.
  CHECK(examples::physical_cores() >= 1);
  CHECK(examples::physical_cores() <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_CASE("memory_figures shows allocated / reserved and the largest category", "[examples][cli]") {
  mg::memory::Snapshot snapshot;
  snapshot.allocated_bytes = 3 * (int64_t{1} << 29);  // 1.5 GiB
  snapshot.reserved_bytes = int64_t{2} << 30;
  snapshot.by_category[static_cast<int>(mg::MemoryCategory::Parameter)].current = int64_t{1} << 28;
  snapshot.by_category[static_cast<int>(mg::MemoryCategory::Activation)].current = int64_t{1} << 30;
  CHECK(examples::memory_figures(snapshot) == "mem 1.50/2.00 GiB ACTIVATION 1.00");
  snapshot.allocated_bytes = 5 << 20;
  snapshot.reserved_bytes = 8 << 20;
  snapshot.by_category[static_cast<int>(mg::MemoryCategory::Activation)].current = 1 << 20;
  snapshot.by_category[static_cast<int>(mg::MemoryCategory::Parameter)].current = 3 << 20;
  CHECK(examples::memory_figures(snapshot) == "mem 5.0/8.0 MiB PARAMETER 3.0");
  CHECK(examples::memory_figures(mg::memory::Snapshot{}) == "mem 0.0/0.0 KiB PARAMETER 0.0");
}
