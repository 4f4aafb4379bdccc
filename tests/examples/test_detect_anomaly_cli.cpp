// tests/examples/test_detect_anomaly_cli.cpp — --detect-anomaly in the programs that train:
// mnist, resnet and gpt accept it, list it in their usage, and train under it exactly as
// without it (the same losses and accuracy, the same checkpoint to the byte: the check
// reads gradients and changes none); it is refused with --amp fp16, whose GradScaler meets
// Inf gradients on purpose, and with memory predictions, whose tensors hold no values.
#include <catch2/catch.hpp>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::json_field;
using mg_test::read_file;
using mg_test::run_ok;
using mg_test::TempDir;
using mg_test::write_two_class_split;

TEST_CASE("mnist trains under --detect-anomaly exactly as without it", "[examples][anomaly]") {
  TempDir dir("anomaly-cli");
  write_two_class_split(dir, "train", 64, 1);
  write_two_class_split(dir, "t10k", 16, 2);
  const std::string common = "--data " + dir.path.string() + " --epochs 2 --batch 16 --threads 2 --summary-json ";
  run_ok(dir, "mnist", common + dir.file("plain.json"));
  run_ok(dir, "mnist", common + dir.file("checked.json") + " --detect-anomaly");
  const std::string plain = read_file(dir.file("plain.json")), checked = read_file(dir.file("checked.json"));
  CHECK(json_field(checked, "final_train_loss") == json_field(plain, "final_train_loss"));
  CHECK(json_field(checked, "test_accuracy") == json_field(plain, "test_accuracy"));
}

TEST_CASE("resnet trains under --detect-anomaly to the same checkpoint", "[examples][anomaly][resnet]") {
  TempDir dir("anomaly-cli");
  // NOTE: tiny (two steps of 4 images): ResNet-18 on a CPU is slow.
  write_two_class_split(dir, "train", 8, 1);
  write_two_class_split(dir, "t10k", 4, 2);
  const std::string common = "--data " + dir.path.string() + " --epochs 1 --batch 4 --threads 2 --save ";
  run_ok(dir, "resnet", common + dir.file("plain.safetensors"));
  run_ok(dir, "resnet", common + dir.file("checked.safetensors") + " --detect-anomaly");
  mg_test::check_same_checkpoint(dir.file("plain.safetensors"), dir.file("checked.safetensors"));
}

TEST_CASE("gpt trains under --detect-anomaly to the same checkpoint", "[examples][anomaly][gpt]") {
  TempDir dir("anomaly-cli");
  const std::string common = "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt --preset tiny --steps 4 "
                             "--batch 4 --eval-interval 4 --eval-iters 2 --threads 2 --save ";
  run_ok(dir, "gpt", common + dir.file("plain.safetensors"));
  run_ok(dir, "gpt", common + dir.file("checked.safetensors") + " --detect-anomaly");
  mg_test::check_same_checkpoint(dir.file("plain.safetensors"), dir.file("checked.safetensors"));
}

TEST_CASE("the examples list --detect-anomaly in their usage and refuse it with --amp fp16 and with memory "
          "predictions",
          "[examples][anomaly]") {
  TempDir dir("anomaly-cli");
  for (const char* program : {"mnist", "resnet", "gpt"}) {
    INFO(program);
    CHECK_THAT(mg_test::run_program(dir, program, "--help").out, Contains("--detect-anomaly"));
    mg_test::check_usage_error(dir, program, "--device cuda --amp fp16 --detect-anomaly",
                               "--amp fp16's GradScaler meets some on purpose");
    mg_test::check_usage_error(dir, program, "--predict-memory --detect-anomaly",
                               "--predict-memory and --fit-batch run on the simulated device");
  }
}
