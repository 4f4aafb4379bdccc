// tests/examples/test_memory_budget_cli.cpp — `--memory-budget BYTES` as a user runs it on
// the CPU (examples/common/budget_plan.h): for --bench's step and for a training run, the
// plan chosen for a budget between the smallest and the largest plan's peak is predicted
// within it, and the step or run with the chosen levers measures the peak that was
// predicted (allocated bytes exactly; reserved within one small-pool segment, as
// tests/examples/test_memory_prediction_cli.cpp explains); a budget nothing fits is refused
// naming the smallest that would; the levers the planner chooses cannot also be given by
// hand.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using mg_test::json_integer;
using mg_test::Outcome;
using mg_test::run_ok;
using mg_test::TempDir;

namespace {

const std::string kTinyBench = "--bench --preset tiny --batch 8 --warmup 1 --threads 1";
// A training run of the tiny GPT as long as the steps a prediction runs (3) and one estimate.
const std::string kTinyTraining = "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt --preset tiny "
                                  "--batch 8 --threads 1 --steps 3 --eval-interval 3 --eval-iters 1";

// The predicted peaks of every plan --explain-plan lists ("<bytes> B (...)"), in its order.
std::vector<int64_t> plan_peaks(const std::string& explained) {
  std::vector<int64_t> peaks;
  const std::regex line(R"((\d+) B \()");
  for (auto match = std::sregex_iterator(explained.begin(), explained.end(), line); match != std::sregex_iterator();
       ++match) {
    peaks.push_back(std::stoll((*match)[1]));
  }
  return peaks;
}

// A budget among the `plans` peaks --explain-plan listed (which must differ): the peak at
// `fraction` of the way from the smallest to the largest.
int64_t budget_among(const std::string& explained, size_t plans, double fraction) {
  std::vector<int64_t> sorted = plan_peaks(explained);
  REQUIRE(sorted.size() == plans);
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted.front() < sorted.back());
  return sorted[static_cast<size_t>(fraction * static_cast<double>(sorted.size()))];
}

}  // namespace

TEST_CASE("gpt --bench --memory-budget weighs every plan and runs one that fits, at its predicted peak",
          "[examples][gpt][budget]") {
  TempDir dir("gpt-budget");
  const Outcome all = run_ok(dir, "gpt", kTinyBench + " --memory-budget 100GiB --explain-plan --predict-memory");
  // 3 checkpointing choices x 4 optimizer states x micro-batches of 8, 4, 2, 1.
  const int64_t budget = budget_among(all.err, 3 * 4 * 4, 0.5);
  INFO("budget " << budget);

  const Outcome predicted =
      run_ok(dir, "gpt", kTinyBench + " --memory-budget " + std::to_string(budget) + " --predict-memory");
  const int64_t predicted_reserved = json_integer(predicted.out, "peak_reserved_bytes", "memory");
  CHECK(predicted_reserved <= budget);
  CHECK_THAT(predicted.err, Catch::Contains("memory budget " + std::to_string(budget) + " bytes: checkpoint="));

  const Outcome measured = run_ok(dir, "gpt", kTinyBench + " --memory-budget " + std::to_string(budget) + " --steps 1");
  CHECK(json_integer(measured.out, "peak_allocated_bytes") == json_integer(predicted.out, "peak_allocated_bytes", "memory"));
  CHECK(std::abs(json_integer(measured.out, "peak_reserved_bytes") - predicted_reserved) <= int64_t{2} << 20);
  // The run took the chosen levers: its JSON line says which, and what the plan predicted.
  CHECK(json_integer(measured.out, "batch") * json_integer(measured.out, "accum") == 8);
  CHECK(json_integer(measured.out, "memory_budget_bytes") == budget);
  CHECK(json_integer(measured.out, "predicted_peak_reserved_bytes") == predicted_reserved);
  CHECK_THAT(measured.out, Catch::Contains("\"predicted_step_ms\":"));
}

TEST_CASE("gpt --memory-budget refuses a budget nothing fits, naming the smallest that would",
          "[examples][gpt][budget]") {
  TempDir dir("gpt-budget-refused");
  const Outcome all = run_ok(dir, "gpt", kTinyBench + " --memory-budget 100GiB --explain-plan --predict-memory");
  const std::vector<int64_t> peaks = plan_peaks(all.err);
  REQUIRE(!peaks.empty());
  const int64_t smallest = *std::min_element(peaks.begin(), peaks.end());
  const Outcome refused = mg_test::run_program(dir, "gpt", kTinyBench + " --memory-budget 1MiB --predict-memory");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("no plan fits a budget of 1048576 bytes") &&
                              Catch::Contains("need at least " + std::to_string(smallest) + " bytes") &&
                              Catch::Contains("filled by"));
}

TEST_CASE("gpt --memory-budget plans a training run: the run keeps within the budget, at its predicted peak",
          "[examples][gpt][budget]") {
  TempDir dir("gpt-training-budget");
  const Outcome all = run_ok(dir, "gpt", kTinyTraining + " --memory-budget 100GiB --explain-plan --predict-memory");
  const int64_t budget = budget_among(all.err, 3 * 4 * 4, 1.0 / 3);
  INFO("budget " << budget);
  const std::string planned = kTinyTraining + " --memory-budget " + std::to_string(budget) + " --summary-json ";

  run_ok(dir, "gpt", planned + dir.file("predicted.json") + " --predict-memory");
  const std::string predicted = mg_test::read_file(dir.file("predicted.json"));
  CHECK(json_integer(predicted, "peak_reserved_bytes", "memory") <= budget);

  const Outcome trained = run_ok(dir, "gpt", planned + dir.file("measured.json"));
  CHECK_THAT(trained.err, Catch::Contains("memory budget " + std::to_string(budget) + " bytes: checkpoint="));
  const std::string measured = mg_test::read_file(dir.file("measured.json"));
  CHECK(json_integer(measured, "peak_allocated_bytes", "memory") ==
        json_integer(predicted, "peak_allocated_bytes", "memory"));
  CHECK(json_integer(measured, "peak_reserved_bytes", "memory") <= budget);
  CHECK(std::abs(json_integer(measured, "peak_reserved_bytes", "memory") -
                 json_integer(predicted, "peak_reserved_bytes", "memory")) <= int64_t{2} << 20);
}

TEST_CASE("resnet --memory-budget plans a training run within the budget", "[examples][resnet][budget]") {
  TempDir dir("resnet-training-budget");
  mg_test::write_two_class_split(dir, "train", 64, 1);
  mg_test::write_two_class_split(dir, "t10k", 16, 2);
  const std::string common = "--data " + dir.path.string() + " --batch 8 --threads 1 --optimizer adamw ";
  const Outcome all = run_ok(dir, "resnet", common + "--memory-budget 100GiB --explain-plan --predict-memory");
  // 3 checkpointing choices x 4 AdamW states x micro-batches of 8, 4, 2, 1.
  const int64_t budget = budget_among(all.err, 3 * 4 * 4, 1.0 / 3);
  const Outcome predicted = run_ok(dir, "resnet", common + "--memory-budget " + std::to_string(budget) + " --predict-memory");
  CHECK_THAT(predicted.err, Catch::Contains("memory budget " + std::to_string(budget) + " bytes: checkpoint="));
  CHECK_THAT(predicted.out, Catch::Contains("predicted peak memory on cpu"));
}

TEST_CASE("for a GPU the planner also weighs every block's activations offloaded, which a prediction counts on the "
          "host",
          "[examples][gpt][budget]") {
  TempDir dir("gpt-budget-offload");
  const std::string gpu = "--bench --preset tiny --batch 8 --warmup 1 --threads 1 --device cuda --amp bf16 ";
  const Outcome all = run_ok(dir, "gpt", gpu + "--memory-budget 100GiB --explain-plan --predict-memory");
  // 4 checkpointing choices (offload too) x 4 optimizer states x micro-batches of 8, 4, 2, 1.
  CHECK(plan_peaks(all.err).size() == 4 * 4 * 4);
  CHECK_THAT(all.err, Catch::Contains("checkpoint=offload, optimizer-state=device, batch=8 x 1"));

  // (Four blocks: the head's logits, which no block holds, are most of the tiny GPT's
  // activations at the bench's 50,304 tokens.)
  const std::string none = run_ok(dir, "gpt", gpu + "--layers 4 --checkpoint none --predict-memory").out;
  const std::string offload = run_ok(dir, "gpt", gpu + "--layers 4 --checkpoint offload --predict-memory").out;
  const int64_t activation_none = json_integer(none, "ACTIVATION", "peak_bytes_by_category");
  const int64_t activation_offload = json_integer(offload, "ACTIVATION", "peak_bytes_by_category");
  const size_t host = offload.find("\"host_memory\":");
  REQUIRE(host != std::string::npos);
  const int64_t activation_on_host = json_integer(offload.substr(host), "ACTIVATION", "peak_bytes_by_category");
  INFO("ACTIVATION peak " << activation_none << " B on the device plain; offloaded " << activation_offload
                          << " B on the device, " << activation_on_host << " B on the host");
  CHECK(activation_offload < activation_none);
  // The blocks' share moved to the host.
  CHECK(activation_on_host >= activation_none - activation_offload);
  CHECK_THAT(offload, Catch::Contains("\"checkpoint\":\"offload\""));
  mg_test::check_usage_error(dir, "gpt", "--bench --preset tiny --checkpoint offload",
                             "--checkpoint offload moves a GPU's saved activations to host memory");
}

TEST_CASE("a memory budget chooses its levers itself, and --explain-plan wants a budget", "[examples][budget]") {
  TempDir dir("budget-flags");
  mg_test::check_usage_error(dir, "gpt", "--preset tiny --memory-budget 1GiB --auto-accum",
                             "--auto-accum, which splits them after an out-of-memory, does not go with it");
  mg_test::check_usage_error(dir, "gpt", kTinyBench + " --memory-budget 1GiB --checkpoint",
                             "--checkpoint is one of the levers --memory-budget chooses");
  mg_test::check_usage_error(dir, "resnet", "--bench --memory-budget 1GiB --accum 2",
                             "--accum is one of the levers --memory-budget chooses");
  mg_test::check_usage_error(dir, "gpt", kTinyBench + " --explain-plan", "--explain-plan prints the plans");
  mg_test::check_usage_error(dir, "resnet", "--bench --memory-budget lots", "--memory-budget");
}
