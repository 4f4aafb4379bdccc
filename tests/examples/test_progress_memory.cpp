// tests/examples/test_progress_memory.cpp — the live memory figures of the examples'
// progress line ("mem 5.0/8.0 MiB ACTIVATION 2.1"): a short CPU run of mnist and of gpt
// prints them on every progress line, and they agree with the run's summary: allocated
// never above reserved, neither above its peak, the largest category never above the
// allocated bytes.
#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using mg_test::Outcome;
using mg_test::TempDir;

namespace {

struct MemoryFigures {
  double allocated = 0;  // bytes, as printed (rounded to the unit's tenth or hundredth)
  double reserved = 0;
  std::string category;
  double category_bytes = 0;
  double rounding = 0;  // half the last printed digit, in bytes
};

// The memory figures of every progress line in `err`; each progress line must have them.
std::vector<MemoryFigures> progress_memory(const std::string& err, const std::string& progress_marker) {
  static const std::regex figures(R"(mem ([0-9.]+)/([0-9.]+) (KiB|MiB|GiB) ([A-Z_]+) ([0-9.]+))");
  std::vector<MemoryFigures> lines;
  size_t begin = 0;
  while (begin < err.size()) {
    const size_t end = err.find('\n', begin);
    const std::string line = err.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    begin = end == std::string::npos ? err.size() : end + 1;
    if (line.find(progress_marker) == std::string::npos) continue;
    std::smatch match;
    INFO(line);
    REQUIRE(std::regex_search(line, match, figures));
    const double unit = match[3] == "GiB" ? 1 << 30 : match[3] == "MiB" ? 1 << 20 : 1 << 10;
    const std::string allocated = match[1];
    const size_t decimals = allocated.size() - allocated.find('.') - 1;
    lines.push_back({std::stod(match[1]) * unit, std::stod(match[2]) * unit, match[4], std::stod(match[5]) * unit,
                     0.5 * unit * std::pow(10.0, -static_cast<double>(decimals))});
  }
  return lines;
}

void check_against_summary(const std::vector<MemoryFigures>& lines, const std::string& json) {
  const double peak_allocated = mg_test::json_number(json, "peak_allocated_bytes", "memory");
  const double peak_reserved = mg_test::json_number(json, "peak_reserved_bytes", "memory");
  REQUIRE(lines.size() >= 2);  // updated as the run goes
  for (const MemoryFigures& line : lines) {
    INFO("allocated " << line.allocated << " reserved " << line.reserved << " " << line.category << " "
                      << line.category_bytes << "; peaks " << peak_allocated << " / " << peak_reserved);
    CHECK(line.allocated > 0);
    CHECK(line.allocated <= line.reserved + 2 * line.rounding);
    CHECK(line.allocated <= peak_allocated + line.rounding);
    CHECK(line.reserved <= peak_reserved + line.rounding);
    // Categories count the bytes tensors asked for, allocated the blocks they got.
    CHECK(line.category_bytes > 0);
    CHECK(line.category_bytes <= line.allocated + 2 * line.rounding);
  }
}

}  // namespace

TEST_CASE("mnist's progress line shows the memory allocated, reserved and its largest category", "[examples][progress]") {
  TempDir dir("progress-memory");
  mg_test::write_two_class_split(dir, "train", 64, 1);
  mg_test::write_two_class_split(dir, "t10k", 16, 2);
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = mg_test::run_program(
      dir, "mnist", "--data " + dir.path.string() + " --epochs 1 --batch 8 --threads 2 --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  // Not a terminal: a line every tenth of the epoch's 8 batches, i.e. after each.
  const std::vector<MemoryFigures> lines = progress_memory(outcome.err, "epoch 1/1");
  CHECK(lines.size() == 8);
  check_against_summary(lines, mg_test::read_file(summary));
}

TEST_CASE("gpt's progress line shows the memory allocated, reserved and its largest category", "[examples][progress]") {
  TempDir dir("progress-memory");
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = mg_test::run_program(
      dir, "gpt", "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt --preset tiny --steps 20 --batch 2 "
                  "--eval-interval 20 --eval-iters 1 --threads 2 --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  const std::vector<MemoryFigures> lines = progress_memory(outcome.err, "tokens/s");
  CHECK(lines.size() == 10);
  check_against_summary(lines, mg_test::read_file(summary));
}
