// tests/examples/test_mnist_cli.cpp — the mnist program as a user runs it: a bad command
// line exits 2 with the usage, a missing dataset exits 1 naming the folder, and one epoch
// on a tiny, clearly separable dataset learns it and writes a complete JSON summary.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "data/mnist_test_files.h"

using mg_test::TempDir;

namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Runs the built mnist program with `arguments`, capturing both streams.
Outcome run_mnist(const TempDir& dir, const std::string& arguments) {
  const std::string out_path = dir.file("stdout.txt"), err_path = dir.file("stderr.txt");
  const std::string command = std::string(MG_BINARY_DIR "/mnist ") + arguments + " >" +
                              out_path + " 2>" + err_path;
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  return {WEXITSTATUS(status), read_file(out_path), read_file(err_path)};
}

// 28x28 images of two classes: class 0 bright in the top half, class 1 in the bottom
// half, both with noise; labels alternate.
void write_two_class_split(const TempDir& dir, const std::string& prefix, int count,
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

// The number after "key": in `json`.
double json_number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace

TEST_CASE("mnist refuses a bad command line with exit code 2 and the usage", "[examples]") {
  TempDir dir("mnist-cli");
  const auto [arguments, message] = GENERATE(table<std::string, std::string>({
      {"--bogus 1", "unknown flag '--bogus'"},
      {"--epochs zero", "--epochs expects a number, got 'zero'"},
      {"--batch 0", "--batch must be at least 1"},
      {"--optim rmsprop", "--optim must be sgd, adam, adamw or adagrad"},
      {"--model resnet", "unknown model 'resnet'; choose mlp or cnn"},
      {"--device tpu", "--device must be cpu or cuda"},
      {"--epochs", "--epochs needs a value"},
  }));
  const Outcome outcome = run_mnist(dir, arguments);
  INFO(arguments);
  CHECK(outcome.exit_code == 2);
  CHECK_THAT(outcome.err, Catch::Contains(message));
  CHECK_THAT(outcome.err, Catch::Contains("usage:"));
}

TEST_CASE("mnist --help prints the usage and exits 0", "[examples]") {
  TempDir dir("mnist-cli");
  const Outcome outcome = run_mnist(dir, "--help");
  CHECK(outcome.exit_code == 0);
  CHECK_THAT(outcome.out, Catch::Contains("--summary-json FILE"));
}

TEST_CASE("mnist reports a missing dataset folder with exit code 1", "[examples]") {
  TempDir dir("mnist-cli");
  const Outcome outcome = run_mnist(dir, "--data /nonexistent-memgrad-data --epochs 1");
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.err, Catch::StartsWith("error: "));
  CHECK_THAT(outcome.err, Catch::Contains("/nonexistent-memgrad-data"));
}

TEST_CASE("mnist reports an unwritable summary path before training", "[examples]") {
  TempDir dir("mnist-cli");
  const Outcome outcome =
      run_mnist(dir, "--data /nonexistent-memgrad-data --summary-json " +
                         dir.file("no-such-folder/summary.json"));
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.err, Catch::Contains("cannot write the summary file"));
}

TEST_CASE("mnist learns a separable dataset in one epoch and writes the summary",
          "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = run_mnist(dir, "--data " + dir.path.string() +
                                             " --epochs 1 --batch 16 --threads 1 --summary-json " +
                                             summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  CHECK_THAT(outcome.out, Catch::Contains("epoch 1: train loss"));
  CHECK_THAT(outcome.out, Catch::Contains("PARAMETER"));

  REQUIRE(std::filesystem::exists(summary));
  CHECK_FALSE(std::filesystem::exists(summary + ".tmp"));
  const std::string json = read_file(summary);
  INFO(json);
  CHECK(json.front() == '{');
  CHECK_THAT(json, Catch::Contains("\"peak_bytes_by_category\""));
  CHECK(json_number(json, "test_accuracy") >= 0.95);
  CHECK(json_number(json, "epochs") == 1);
  // 784*512+512 + 512*256+256 + 256*2+2 weights and biases for two classes.
  CHECK(json_number(json, "parameters") == 533762);
}

TEST_CASE("mnist --model mlp reaches 88% on Fashion-MNIST in 3 epochs", "[examples][fashion]") {
  const std::string dataset = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dataset)) {
    WARN("Fashion-MNIST is not installed at " << dataset << " (package dataset-fashion-mnist)");
    return;
  }
  TempDir dir("fashion");
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = run_mnist(dir, "--model mlp --epochs 3 --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  const std::string json = read_file(summary);
  CHECK(json_number(json, "test_accuracy") >= 0.88);
  CHECK(json_number(json, "parameters") == 535818);
  // The memory report agrees with arithmetic: Adam keeps two moments per parameter.
  CHECK(json_number(json, "PARAMETER") == 535818 * 4);
}
