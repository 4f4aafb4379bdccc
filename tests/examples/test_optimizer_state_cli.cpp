// tests/examples/test_optimizer_state_cli.cpp — --optimizer-state as a user runs it: the gpt
// and resnet programs train with AdamW's state on the device, in 8 bits or offloaded to the
// host; an offloaded run's losses equal the plain run's (bit for bit on the CPU); a stopped
// run resumes exactly with each state; a prediction for a GPU says the offloaded state is
// in host memory, none of it on the device; on the CPU a prediction equals the measured
// step; flags that do not fit are refused.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::json_field;
using mg_test::json_integer;
using mg_test::Outcome;
using mg_test::run_ok;
using mg_test::read_file;
using mg_test::TempDir;

namespace {

const std::string kText = MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt";

// A category's peak in a prediction's "host_memory" section.
int64_t host_peak(const std::string& json, const std::string& category) {
  const size_t host = json.find("\"host_memory\":");
  REQUIRE(host != std::string::npos);
  return json_integer(json.substr(host), category, "peak_bytes_by_category");
}

}  // namespace

TEST_CASE("flags that do not fit --optimizer-state are refused before any work", "[examples][cli][optimizer_state]") {
  TempDir dir("optimizer-state-cli");
  mg_test::check_usage_error(dir, "gpt", "--optimizer-state 4bit",
                             "--optimizer-state must be device, 8bit, offload or offload-delayed, got '4bit'");
  mg_test::check_usage_error(dir, "gpt", "--optimizer-state offload --distributed --zero",
                             "--optimizer-state offload does not go with --zero");
  mg_test::check_usage_error(dir, "resnet", "--optimizer-state 8bit",
                             "--optimizer-state places AdamW's moments: it needs --optimizer adamw");
  mg_test::check_usage_error(dir, "resnet", "--optimizer adam", "--optimizer must be sgd or adamw, got 'adam'");
}

TEST_CASE("gpt: every --optimizer-state trains, and offloaded AdamW's losses equal AdamW's on the CPU",
          "[examples][gpt][optimizer_state]") {
  TempDir dir("optimizer-state-gpt");
  const std::string common = "--data " + kText + " --preset tiny --steps 16 --batch 4 --eval-interval 8 "
                             "--eval-iters 2 --threads 2 ";
  auto summary = [&](const std::string& state) {
    const std::string json = dir.file(state + ".json");
    run_ok(dir, "gpt", common + "--optimizer-state " + state + " --summary-json " + json);
    return read_file(json);
  };
  const std::string device = summary("device"), offload = summary("offload"), eight_bit = summary("8bit"),
                    delayed = summary("offload-delayed");
  CHECK(json_field(offload, "optimizer_state") == "\"offload\"");
  // The same arithmetic on the same float32 values: the same losses to the last digit.
  for (const char* key : {"val_loss_per_eval", "train_loss"}) {
    INFO(key);
    CHECK(json_field(offload, key) == json_field(device, key));
  }
  // The others learn as well: within 5% of AdamW's final loss.
  for (const std::string* json : {&eight_bit, &delayed}) {
    CHECK(mg_test::json_number(*json, "val_loss") < mg_test::json_number(device, "val_loss") * 1.05);
  }
  // 8-bit moments hold less state than float32 ones; offloaded ones are more on the CPU (the
  // master weights are the host's too).
  const int64_t device_state = json_integer(device, "OPTIMIZER_STATE", "peak_bytes_by_category");
  CHECK(json_integer(eight_bit, "OPTIMIZER_STATE", "peak_bytes_by_category") < device_state / 2);
  CHECK(json_integer(offload, "OPTIMIZER_STATE", "peak_bytes_by_category") > device_state);
}

TEST_CASE("gpt: a run stopped and resumed with 8-bit or offloaded state ends as one that never stopped",
          "[examples][gpt][optimizer_state]") {
  TempDir dir("optimizer-state-resume");
  for (const std::string state : {"8bit", "offload", "offload-delayed"}) {
    INFO(state);
    const std::string common = "--data " + kText + " --preset tiny --steps 20 --batch 4 --eval-interval 10 "
                               "--eval-iters 2 --threads 2 --optimizer-state " + state + " ";
    run_ok(dir, "gpt", common + "--save " + dir.file(state + "-straight.safetensors"));
    run_ok(dir, "gpt", common + "--stop-after 10 --save " + dir.file(state + "-resumed.safetensors"));
    run_ok(dir, "gpt", common + "--resume " + dir.file(state + "-resumed.safetensors") + " --save " +
                           dir.file(state + "-resumed.safetensors"));
    mg_test::check_same_checkpoint(dir.file(state + "-straight.safetensors"), dir.file(state + "-resumed.safetensors"));
  }
  // A checkpoint holds its optimizer's state: another --optimizer-state is refused.
  const Outcome refused = mg_test::run_program(
      dir, "gpt", "--data " + kText + " --preset tiny --steps 20 --batch 4 --threads 2 --resume " +
                      dir.file("8bit-resumed.safetensors"));
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Contains("was written by AdamW8bit but this is AdamW"));
}

TEST_CASE("a GPU prediction puts offloaded AdamW's state in host memory, none on the device",
          "[examples][gpt][optimizer_state][predict]") {
  TempDir dir("optimizer-state-predict");
  const std::string common = "--data " + kText + " --preset tiny --batch 4 --device cuda --amp bf16 --threads 2 "
                             "--predict-memory --summary-json ";
  run_ok(dir, "gpt", common + dir.file("device.json"));
  const Outcome offloaded = run_ok(dir, "gpt", common + dir.file("offload.json") + " --optimizer-state offload");
  CHECK_THAT(offloaded.out, Contains("in host memory (pinned where the target is a GPU)"));
  const std::string device = read_file(dir.file("device.json")), offload = read_file(dir.file("offload.json"));
  // The device's peaks (the first section; "host_memory" follows it).
  CHECK(json_integer(device, "OPTIMIZER_STATE", "peak_bytes_by_category") > 0);
  CHECK(json_integer(offload, "OPTIMIZER_STATE", "peak_bytes_by_category") == 0);
  // On the host: a float32 master and two moments per element, a 4-byte step per tensor.
  const int64_t parameter_bytes = json_integer(device, "PARAMETER", "peak_bytes_by_category");  // float32
  const int64_t device_state = json_integer(device, "OPTIMIZER_STATE", "peak_bytes_by_category");
  const int64_t tensors = (device_state - 2 * parameter_bytes) / 4;  // AdamW: 2 moments and a step each
  CHECK(host_peak(offload, "OPTIMIZER_STATE") == 3 * parameter_bytes + 4 * tensors);
  CHECK(host_peak(offload, "GRADIENT") == parameter_bytes);  // the gradients' host copies
  CHECK(device.find("\"host_memory\":") == std::string::npos);  // nothing kept on the host
  CHECK(json_integer(offload, "peak_allocated_bytes", "memory") < json_integer(device, "peak_allocated_bytes", "memory"));
}

TEST_CASE("on the CPU a prediction with 8-bit or offloaded state equals the measured step",
          "[examples][gpt][optimizer_state][predict]") {
  TempDir dir("optimizer-state-bench");
  for (const std::string state : {"8bit", "offload"}) {
    INFO(state);
    const std::string common = "--bench --device cpu --preset tiny --batch 2 --warmup 1 --threads 2 --optimizer-state " +
                               state;
    const std::string measured = run_ok(dir, "gpt", common + " --steps 1").out;
    const std::string predicted = run_ok(dir, "gpt", common + " --predict-memory").out;
    CHECK(json_integer(predicted, "peak_allocated_bytes", "memory") == json_integer(measured, "peak_allocated_bytes"));
    CHECK(json_integer(predicted, "OPTIMIZER_STATE", "peak_bytes_by_category") ==
          json_integer(measured, "OPTIMIZER_STATE", "peak_bytes_by_category"));
  }
}

TEST_CASE("resnet trains with AdamW and each --optimizer-state", "[examples][resnet][optimizer_state]") {
  TempDir dir("optimizer-state-resnet");
  mg_test::write_two_class_split(dir, "train", 8, 1);
  mg_test::write_two_class_split(dir, "t10k", 4, 2);
  const std::string data = dir.path.string();
  for (const std::string state : {"device", "8bit", "offload"}) {
    INFO(state);
    const Outcome outcome = run_ok(dir, "resnet", "--data " + data + " --epochs 1 --batch 4 --threads 2 "
                                                  "--optimizer adamw --optimizer-state " + state);
    CHECK_THAT(outcome.out, Contains("AdamW (weight decay 0.05), one-cycle lr to 0.001"));
    CHECK_THAT(outcome.out, Contains("epoch 1: train loss"));
  }
}
