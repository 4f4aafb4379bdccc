// tests/examples/test_mnist_cli.cpp — the mnist program as a user runs it: a bad command
// line exits 2 with the usage, a missing dataset exits 1 naming the folder, one epoch on a
// tiny, clearly separable dataset learns it and writes a complete JSON summary, --accum
// trains as the larger batch does, and --checkpoint lowers the CNN's activation peak.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using mg_test::json_number;
using mg_test::Outcome;
using mg_test::read_file;
using mg_test::TempDir;
using mg_test::write_two_class_split;

namespace {

// The run's ACTIVATION peak: memory.peak_bytes_by_category.ACTIVATION.
double activation_peak(const std::string& json) { return json_number(json, "ACTIVATION", "peak_bytes_by_category"); }

}  // namespace

TEST_CASE("mnist refuses a bad command line with exit code 2 and one line", "[examples]") {
  TempDir dir("mnist-cli");
  const auto [arguments, message] = GENERATE(table<std::string, std::string>({
      {"--bogus 1", "unknown flag '--bogus'"},
      {"--epochs zero", "--epochs expects a number, got 'zero'"},
      {"--batch 0", "--batch must be at least 1"},
      {"--optim rmsprop", "--optim must be sgd, adam, adamw or adagrad"},
      {"--model resnet", "unknown model 'resnet'; choose mlp or cnn"},
      {"--device tpu", "--device must be cpu or cuda"},
      {"--epochs", "--epochs needs a value"},
      {"--accum 0", "--accum must be at least 1"},
      {"--limit -5", "--limit must be at least 1"},
      {"--checkpoint", "--checkpoint is for --model cnn"},
      {"--amp fp16", "--amp fp16 needs --device cuda"},
      {"--amp int8", "--amp must be fp16, bf16 or fp32, got 'int8'"},
      {"--cuda-graph", "--cuda-graph captures CUDA work: it needs --device cuda"},
      {"--cuda-graph --device cuda --accum 2", "--cuda-graph captures a step of one batch"},
      {"--cuda-graph --device cuda --predict-memory", "it goes with none of --memory-timeline"},
  }));
  mg_test::check_usage_error(dir, "mnist", arguments, message);
}

TEST_CASE("mnist --help prints the usage and exits 0", "[examples]") {
  TempDir dir("mnist-cli");
  const Outcome outcome = mg_test::run_program(dir, "mnist", "--help");
  CHECK(outcome.exit_code == 0);
  CHECK_THAT(outcome.out, Catch::Contains("--summary-json FILE"));
}

TEST_CASE("mnist reports a missing dataset folder with exit code 1", "[examples]") {
  TempDir dir("mnist-cli");
  const Outcome outcome = mg_test::run_program(dir, "mnist", "--data /nonexistent-memgrad-data --epochs 1");
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.err, Catch::StartsWith("error: "));
  CHECK_THAT(outcome.err, Catch::Contains("/nonexistent-memgrad-data"));
}

TEST_CASE("mnist reports an unwritable summary or memory timeline path before reading the data", "[examples]") {
  TempDir dir("mnist-cli");
  for (const char* flag : {"--summary-json", "--memory-timeline"}) {
    const std::string path = dir.file("no-such-folder/out");
    mg_test::check_usage_error(dir, "mnist", std::string("--data /nonexistent-memgrad-data ") + flag + " " + path,
                               std::string(flag) + " '" + path + "': no such folder '" + dir.file("no-such-folder") + "'");
  }
}

TEST_CASE("mnist --memory-timeline draws the first training steps as a self-contained page", "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 64, 1);
  write_two_class_split(dir, "t10k", 16, 2);
  const std::string page = dir.file("timeline.html");
  const Outcome outcome = mg_test::run_program(
      dir, "mnist", "--data " + dir.path.string() + " --epochs 1 --batch 16 --threads 1 --memory-timeline " + page);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  const std::string html = read_file(page);
  CHECK_THAT(html, Catch::Contains("<svg"));
  for (const char* category : {"PARAMETER", "GRADIENT", "OPTIMIZER_STATE", "ACTIVATION"}) {
    CHECK_THAT(html, Catch::Contains(category));
  }
  CHECK_THAT(html, !Catch::Contains("http"));  // no network resources
  CHECK_FALSE(std::filesystem::exists(page + ".tmp"));
  // The leak check of the first steady step: a training loop that keeps nothing.
  CHECK_THAT(outcome.err, Catch::Contains("tensors step 1 created and left alive"));
  CHECK_THAT(outcome.err, Catch::Contains("left alive (other than parameters, gradients and optimizer state): 0 tensors"));
}

TEST_CASE("mnist learns a separable dataset in one epoch and writes the summary",
          "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = mg_test::run_program(dir, "mnist", "--data " + dir.path.string() +
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
  // 784*512+512 + 512*256+256 + 256*10+10 weights and biases: MNIST's 10 classes, of which
  // this dataset uses two.
  CHECK(json_number(json, "parameters") == 535818);
}

TEST_CASE("mnist --accum 4 trains as a four-times larger batch and records it", "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  // NOTE: the loader cuts one shuffled order into batches, so 4 micro-batches of 8 are the
  // samples of one batch of 32; the MLP has no batch norm or dropout, so both runs take
  // the same steps, up to float32 rounding of the gradients' sums.
  const std::string common = "--data " + dir.path.string() + " --model mlp --epochs 1 --limit 128 --threads 1 ";
  const Outcome accumulated =
      mg_test::run_program(dir, "mnist", common + "--batch 8 --accum 4 --summary-json " + dir.file("accumulated.json"));
  INFO(accumulated.err);
  REQUIRE(accumulated.exit_code == 0);
  CHECK_THAT(accumulated.out, Catch::Contains("batch 8 x 4 accumulated per step"));
  const Outcome large = mg_test::run_program(dir, "mnist", common + "--batch 32 --summary-json " + dir.file("large.json"));
  INFO(large.err);
  REQUIRE(large.exit_code == 0);

  const std::string accumulated_json = read_file(dir.file("accumulated.json"));
  const std::string large_json = read_file(dir.file("large.json"));
  INFO(accumulated_json);
  CHECK(json_number(accumulated_json, "accum") == 4);
  CHECK(json_number(accumulated_json, "batch_size") == 8);
  CHECK(json_number(large_json, "accum") == 1);
  CHECK(json_number(accumulated_json, "final_train_loss") ==
        Approx(json_number(large_json, "final_train_loss")).epsilon(1e-6));
  CHECK(json_number(accumulated_json, "test_accuracy") == json_number(large_json, "test_accuracy"));
  // The micro-batch is a quarter of the batch, and so are its saved activations (measured:
  // 24,676 and 98,692 bytes).
  CHECK(activation_peak(accumulated_json) == Approx(activation_peak(large_json) / 4).epsilon(0.01));
}

TEST_CASE("mnist --model cnn --checkpoint trains as without and lowers the activation peak", "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 64, 1);
  write_two_class_split(dir, "t10k", 32, 2);
  const std::string common = "--data " + dir.path.string() + " --model cnn --epochs 1 --batch 16 --threads 2 ";
  const Outcome plain = mg_test::run_program(dir, "mnist", common + "--summary-json " + dir.file("plain.json"));
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  const Outcome checked = mg_test::run_program(dir, "mnist", common + "--checkpoint --summary-json " + dir.file("checked.json"));
  INFO(checked.err);
  REQUIRE(checked.exit_code == 0);
  CHECK_THAT(checked.out, Catch::Contains("convolutions checkpointed"));

  const std::string plain_json = read_file(dir.file("plain.json"));
  const std::string checked_json = read_file(dir.file("checked.json"));
  CHECK_THAT(checked_json, Catch::Contains("\"checkpoint\":true"));
  // The recompute replays the convolutions exactly and the dropout masks are not redrawn.
  CHECK(json_number(checked_json, "final_train_loss") ==
        Approx(json_number(plain_json, "final_train_loss")).epsilon(1e-6));
  // Measured on the CPU: 4,647,108 bytes, 3,891,200 with --checkpoint (16.3% lower): the
  // head's activations are gone when the convolutions are recomputed. (The step's total
  // peak does not fall: it is in the convolutions' backward; see docs/memory.md.)
  const double plain_peak = activation_peak(plain_json), checked_peak = activation_peak(checked_json);
  INFO("ACTIVATION peak " << plain_peak << " bytes, " << checked_peak << " with --checkpoint");
  CHECK(checked_peak <= 0.9 * plain_peak);
}

TEST_CASE("mnist --model mlp reaches 88% on Fashion-MNIST in 3 epochs", "[examples][fashion]") {
  const std::string dataset = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dataset)) {
    WARN("Fashion-MNIST is not installed at " << dataset << " (package dataset-fashion-mnist)");
    return;
  }
  TempDir dir("fashion");
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = mg_test::run_program(dir, "mnist", "--model mlp --epochs 3 --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  const std::string json = read_file(summary);
  CHECK(json_number(json, "test_accuracy") >= 0.88);
  CHECK(json_number(json, "parameters") == 535818);
  // The memory report agrees with arithmetic: Adam keeps two moments per parameter.
  CHECK(json_number(json, "PARAMETER") == 535818 * 4);
}

TEST_CASE("mnist --amp bf16 learns the separable dataset under autocast on the CPU", "[examples]") {
  TempDir dir("mnist-cli");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string summary = dir.file("summary.json");
  const Outcome outcome = mg_test::run_program(
      dir, "mnist", "--data " + dir.path.string() + " --epochs 1 --batch 16 --threads 1 --amp bf16 --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  CHECK_THAT(outcome.out, Catch::Contains("autocast bf16"));
  const std::string json = read_file(summary);
  INFO(json);
  CHECK_THAT(json, Catch::Contains("\"amp\":\"bf16\""));
  CHECK(json_number(json, "test_accuracy") >= 0.95);
  // The weights' bfloat16 copies were made (so autocast did run) and lived in the forward
  // passes' autocast regions only: none is left at the end.
  CHECK(json_number(json, "AUTOCAST_CACHE", "peak_bytes_by_category") > 0);
  CHECK(json_number(json, "AUTOCAST_CACHE") == 0);
}
