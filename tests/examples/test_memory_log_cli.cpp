// tests/examples/test_memory_log_cli.cpp — --memory-log FILE.csv (examples/common/
// memory_timeline.h) in gpt and mnist on the CPU: a header line, then one line per
// optimizer step whose PARAMETER column is the model's parameter bytes (float32, as the
// program prints the count) and whose allocated bytes stay the same from the second step
// on (the first creates the optimizer's state; nothing else outlives a step); a path that
// cannot be written is refused with the command line, before any work.
#include <catch2/catch.hpp>
#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "examples/program_runner.h"

using mg_test::Outcome;
using mg_test::TempDir;

namespace {

struct MemoryLog {
  std::vector<std::string> header;
  std::vector<std::vector<int64_t>> rows;  // one per optimizer step

  int64_t at(size_t row, const std::string& column) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == column) return rows.at(row).at(i);
    }
    FAIL("no column " << column);
    return 0;
  }
};

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> parts;
  std::stringstream stream(line);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

MemoryLog read_log(const std::string& path) {
  std::stringstream text(mg_test::read_file(path));
  MemoryLog log;
  std::string line;
  REQUIRE(std::getline(text, line));
  log.header = fields(line);
  while (std::getline(text, line)) {
    std::vector<int64_t> values;
    for (const std::string& field : fields(line)) values.push_back(std::stoll(field));
    REQUIRE(values.size() == log.header.size());
    log.rows.push_back(values);
  }
  return log;
}

// "<N> parameters" in a run's set-up lines.
int64_t printed_parameters(const std::string& out) {
  std::smatch match;
  REQUIRE(std::regex_search(out, match, std::regex(R"((\d+) parameters)")));
  return std::stoll(match[1]);
}

// What every run's log holds, `steps` optimizer steps of a model of `parameters` floats.
void check_log(const MemoryLog& log, int64_t steps, int64_t parameters) {
  CHECK(log.header == std::vector<std::string>{"step", "allocated_bytes", "reserved_bytes", "segments",
                                               "requested_bytes", "PARAMETER", "GRADIENT", "OPTIMIZER_STATE",
                                               "ACTIVATION", "INPUT", "TEMPORARY", "WORKSPACE", "AUTOCAST_CACHE",
                                               "COMMUNICATION"});
  REQUIRE(log.rows.size() == static_cast<size_t>(steps));
  for (size_t row = 0; row < log.rows.size(); ++row) {
    INFO("step " << row + 1);
    CHECK(log.at(row, "step") == static_cast<int64_t>(row) + 1);
    CHECK(log.at(row, "PARAMETER") == 4 * parameters);
    CHECK(log.at(row, "ACTIVATION") == 0);  // every step's graph is gone at its end
    CHECK(log.at(row, "allocated_bytes") <= log.at(row, "reserved_bytes"));
    if (row >= 1) CHECK(log.at(row, "allocated_bytes") == log.at(1, "allocated_bytes"));
  }
}

}  // namespace

TEST_CASE("gpt --memory-log writes a line of the allocator's counters per step, flat after the first",
          "[examples][gpt][memory-log]") {
  TempDir dir("gpt-memory-log");
  const std::string log = dir.file("memory.csv");
  const Outcome run = mg_test::run_ok(dir, "gpt", "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt "
                                                  "--preset tiny --steps 6 --batch 4 --eval-interval 3 --eval-iters 1 "
                                                  "--threads 1 --memory-log " + log);
  check_log(read_log(log), 6, printed_parameters(run.out));
}

TEST_CASE("mnist --memory-log writes a line per optimizer step over every epoch, flat after the first",
          "[examples][mnist][memory-log]") {
  TempDir dir("mnist-memory-log");
  write_two_class_split(dir, "train", 64, 1);
  write_two_class_split(dir, "t10k", 16, 2);
  const std::string log = dir.file("memory.csv");
  // 2 epochs of 4 steps of 8 x 2 samples, with an evaluation between them.
  const Outcome run = mg_test::run_ok(dir, "mnist", "--data " + dir.path.string() + " --epochs 2 --batch 8 --accum 2 "
                                                    "--threads 1 --memory-log " + log);
  const MemoryLog memory_log = read_log(log);
  check_log(memory_log, 8, printed_parameters(run.out));
  // Adam's two moments of every parameter and a 4-byte step counter for each of the MLP's
  // 6 parameter tensors.
  CHECK(memory_log.at(7, "OPTIMIZER_STATE") == 2 * 4 * printed_parameters(run.out) + 6 * 4);
}

TEST_CASE("a --memory-log file in a folder that does not exist is refused before any work", "[examples][memory-log]") {
  TempDir dir("memory-log-path");
  for (const std::string program : {"gpt", "mnist"}) {
    mg_test::check_usage_error(dir, program, "--memory-log " + dir.file("no-such-folder/memory.csv"),
                               "--memory-log '" + dir.file("no-such-folder/memory.csv") + "': no such folder");
  }
}
