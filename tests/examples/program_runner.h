// tests/examples/program_runner.h — what the example-program tests share: running a built
// program with its output captured, checking that a bad command line is refused, and a
// tiny two-class dataset in MNIST's file format.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "data/mnist_test_files.h"

namespace mg_test {

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Runs the built example `program` (mnist, resnet) with `arguments`, capturing both streams.
inline Outcome run_program(const TempDir& dir, const std::string& program, const std::string& arguments) {
  const std::string out_path = dir.file("stdout.txt"), err_path = dir.file("stderr.txt");
  const std::string command = std::string(MG_BINARY_DIR "/") + program + " " + arguments + " >" +
                              out_path + " 2>" + err_path;
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  return {WEXITSTATUS(status), read_file(out_path), read_file(err_path)};
}

// Runs `program` and requires that it succeeds (exit code 0), showing the command line and
// its stderr when it does not.
inline Outcome run_ok(const TempDir& dir, const std::string& program, const std::string& arguments) {
  const Outcome outcome = run_program(dir, program, arguments);
  INFO(program << " " << arguments << "\n" << outcome.err);
  REQUIRE(outcome.exit_code == 0);
  return outcome;
}

// Runs `program` with a bad command line: before any work it must exit with code 2 and
// print one line on stderr, "<program>: <message> (<program> --help lists the flags)",
// and nothing on stdout (where a run's first lines go).
inline void check_usage_error(const TempDir& dir, const std::string& program, const std::string& arguments,
                              const std::string& message) {
  INFO(program << " " << arguments);
  const Outcome outcome = run_program(dir, program, arguments);
  INFO(outcome.err);
  CHECK(outcome.exit_code == 2);
  CHECK_THAT(outcome.err, Catch::Contains(message));
  CHECK_THAT(outcome.err, Catch::StartsWith(program + ": ") && Catch::EndsWith("--help lists the flags)\n"));
  CHECK(std::count(outcome.err.begin(), outcome.err.end(), '\n') == 1);
  CHECK(outcome.out.empty());
}

// 28x28 images of two classes: class 0 bright in the top half, class 1 in the bottom
// half, both with noise; labels alternate.
inline void write_two_class_split(const TempDir& dir, const std::string& prefix, int count,
                           uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int> noise(0, 60);
  std::vector<uint8_t> pixels, labels;
  for (int image = 0; image < count; ++image) {
    const int label = image % 2;
    for (int row = 0; row < 28; ++row) {
      const bool bright = (row < 14) == (label == 0);
      for (int col = 0; col < 28; ++col) {
        pixels.push_back(static_cast<uint8_t>(noise(engine) + (bright ? 180 : 0)));
      }
    }
    labels.push_back(static_cast<uint8_t>(label));
  }
  mg_test::write_mnist_split(dir, prefix, 28, 28, pixels, labels);
}

}  // namespace mg_test
