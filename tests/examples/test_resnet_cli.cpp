// tests/examples/test_resnet_cli.cpp — the resnet program as a user runs it: --bench writes
// bench_train_step's JSON fields; --checkpoint lowers the step's activation peak and
// --accum leaves it as it is; a run stopped after one epoch and resumed from its
// checkpoint ends with the same model, optimizer state and accuracies as a run that was
// never stopped; a checkpoint that does not fit the command line is refused; --amp bf16
// halves the activation peak on the CPU.
#include <catch2/catch.hpp>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::json_field;
using mg_test::json_number;
using mg_test::Outcome;
using mg_test::read_file;
using mg_test::TempDir;
using mg_test::write_two_class_split;

TEST_CASE("resnet --bench writes bench_train_step's fields", "[examples][resnet]") {
  TempDir dir("resnet-cli");
  const std::string summary = dir.file("bench.json");
  const Outcome outcome = mg_test::run_program(
      dir, "resnet", "--bench --model resnet18 --batch 4 --steps 2 --warmup 0 --device cpu --summary-json " + summary);
  INFO(outcome.err);
  REQUIRE(outcome.exit_code == 0);
  const std::string json = read_file(summary);
  CHECK(json == outcome.out);  // the one JSON line on stdout, for bench/summarize.py
  CHECK(json_field(json, "framework") == "\"memgrad\"");
  CHECK(json_field(json, "model") == "\"resnet18\"");
  CHECK(json_field(json, "batch") == "4");
  CHECK(json_field(json, "steps") == "2");
  CHECK(json_field(json, "device") == "\"cpu\"");
  for (const char* key : {"step_ms_median", "step_ms_p10", "step_ms_p90", "mean_ms", "host_issue_ms", "samples_per_s"}) {
    INFO(key);
    CHECK(json_number(json, key) > 0);
  }
  // ResNet-18's 11.2 M float32 parameters (3 input channels, 10 classes), and as many
  // bytes again of gradients and of momentum buffers.
  const double parameter_bytes = json_number(json, "PARAMETER");
  CHECK(parameter_bytes > 44.0e6);
  CHECK(parameter_bytes < 45.0e6);
  CHECK(json_number(json, "OPTIMIZER_STATE") > 44.0e6);
  CHECK(json_number(json, "GRADIENT") > 44.0e6);
  CHECK(json_number(json, "ACTIVATION") > 0);
  CHECK(json_number(json, "peak_allocated_bytes") > 3 * parameter_bytes);
  CHECK_THAT(outcome.err, Contains("median step"));
}

TEST_CASE("resnet --bench --checkpoint lowers the step's activation peak and --accum keeps it", "[examples][resnet]") {
  TempDir dir("resnet-cli");
  // The ACTIVATION peak of the one step measured after reset_peak_stats().
  // NOTE: the smallest run that measures it: a step takes seconds on 2 CPU cores.
  auto activation_peak = [&](const std::string& flags) {
    const std::string summary = dir.file("bench.json");
    const Outcome outcome = mg_test::run_program(dir, "resnet", "--bench --model resnet18 --batch 4 --steps 1 --device cpu --threads 2 "
                                            "--summary-json " + summary + " " + flags);
    INFO(flags << "\n" << outcome.err);
    REQUIRE(outcome.exit_code == 0);
    return json_number(read_file(summary), "ACTIVATION");
  };
  const double plain = activation_peak("--warmup 1");
  const double checked = activation_peak("--warmup 1 --checkpoint");
  const double accumulated = activation_peak("--warmup 0 --accum 2");  // activations do not depend on warm-up
  INFO("ACTIVATION peak: " << plain << " bytes, " << checked << " with --checkpoint ("
                           << 100.0 * (plain - checked) / plain << "% lower), " << accumulated << " with --accum 2");
  // Measured on the CPU: 18,790,068 bytes, 6,292,480 with --checkpoint (66.5% lower: the
  // stem and every block of the four stages checkpointed), and 18,790,068 with --accum 2:
  // each micro-batch's backward frees its graph.
  CHECK(checked <= 0.4 * plain);
  CHECK(accumulated == plain);
}

TEST_CASE("resnet --bench --amp bf16 halves the activation peak and caches the weights' casts", "[examples][resnet]") {
  TempDir dir("resnet-cli");
  auto bench = [&](const std::string& amp) {
    const std::string summary = dir.file("bench-" + amp + ".json");
    const Outcome outcome = mg_test::run_program(
        dir, "resnet", "--bench --model resnet18 --batch 4 --steps 1 --warmup 0 --device cpu --threads 2 --amp " + amp +
                           " --summary-json " + summary);
    INFO(amp << "\n" << outcome.err);
    REQUIRE(outcome.exit_code == 0);
    return read_file(summary);
  };
  const std::string fp32 = bench("fp32"), bf16 = bench("bf16");
  CHECK(json_field(fp32, "amp") == "\"fp32\"");
  CHECK(json_field(bf16, "amp") == "\"bf16\"");
  const double ratio = json_number(bf16, "ACTIVATION") / json_number(fp32, "ACTIVATION");
  INFO("ACTIVATION peak " << json_number(fp32, "ACTIVATION") << " -> " << json_number(bf16, "ACTIVATION") << " bytes (x" << ratio << ")");
  // Measured on the CPU: 18,790,068 -> 9,438,900 bytes (x0.502): every saved convolution
  // input, batch-norm input and ReLU output is 16-bit; batch norm's float32 statistics are
  // the few bytes over half.
  CHECK(ratio > 0.45);
  CHECK(ratio < 0.55);
  // One bfloat16 copy of each float32 weight, cast once per step: half the parameter bytes
  // (less the batch-norm affine parameters, which stay float32).
  CHECK(json_number(fp32, "AUTOCAST_CACHE") == 0);
  CHECK(json_number(bf16, "AUTOCAST_CACHE") > 0.45 * json_number(bf16, "PARAMETER"));
  CHECK(json_number(bf16, "AUTOCAST_CACHE") < 0.5 * json_number(bf16, "PARAMETER"));
}

TEST_CASE("resnet refuses a bad command line with exit code 2", "[examples][resnet]") {
  TempDir dir("resnet-cli");
  const auto [arguments, message] = GENERATE(table<std::string, std::string>({
      {"--model resnet50", "--model resnet50 is for --bench"},
      {"--bench --save x --augment", "--augment and --save do nothing with --bench"},
      {"--bench --model vgg", "unknown model 'vgg'"},
      {"--epochs 0", "--epochs must be at least 1"},
      {"--bench --accum 0", "--accum must be at least 1"},
      {"--bench --amp fp16", "--amp fp16 needs --device cuda"},
      {"--amp half", "--amp must be fp16, bf16 or fp32, got 'half'"},
      {"--bench --cuda-graph", "--cuda-graph captures CUDA work: it needs --device cuda"},
      {"--bench --wgrad-stream", "--wgrad-stream orders CUDA streams: it needs --device cuda"},
      {"--cuda-graph --device cuda --memory-timeline t.html", "it goes with none of --memory-timeline"},
  }));
  mg_test::check_usage_error(dir, "resnet", arguments, message);
}

TEST_CASE("a resnet run stopped and resumed ends as one that never stopped", "[examples][resnet]") {
  TempDir dir("resnet-cli");
  // NOTE: tiny (two steps of 4 images per epoch): ResNet-18 on a CPU is slow, more so
  // under the sanitizers.
  write_two_class_split(dir, "train", 8, 1);
  write_two_class_split(dir, "t10k", 4, 2);
  const std::string common = "--data " + dir.path.string() + " --epochs 2 --batch 4 --augment --lr 0.05 --threads 2 ";

  const Outcome straight = mg_test::run_program(
      dir, "resnet", common + "--save " + dir.file("straight.safetensors") + " --summary-json " + dir.file("straight.json"));
  INFO(straight.err);
  REQUIRE(straight.exit_code == 0);

  const Outcome first = mg_test::run_program(dir, "resnet", common + "--stop-after 1 --save " + dir.file("resumed.safetensors"));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Contains("epoch 1:"));
  CHECK_THAT(first.out, !Contains("epoch 2:"));

  {  // the resumed run continues from the saved epoch, exactly
    const Outcome second = mg_test::run_program(dir, "resnet", common + "--resume " + dir.file("resumed.safetensors") + " --save " +
                                               dir.file("resumed.safetensors") + " --summary-json " +
                                               dir.file("resumed.json"));
    INFO(second.err);
    REQUIRE(second.exit_code == 0);
    CHECK_THAT(second.out, Contains("resumed after epoch 1"));
    CHECK_THAT(second.out, !Contains("epoch 1:"));
    CHECK_THAT(second.out, Contains("epoch 2:"));

    mg_test::check_same_checkpoint(dir.file("straight.safetensors"), dir.file("resumed.safetensors"));
    const std::string straight_json = read_file(dir.file("straight.json"));
    const std::string resumed_json = read_file(dir.file("resumed.json"));
    CHECK(json_field(resumed_json, "resumed_from_epoch") == "1");
    CHECK(json_field(resumed_json, "test_accuracy_per_epoch") == json_field(straight_json, "test_accuracy_per_epoch"));
    CHECK(json_field(resumed_json, "best_test_accuracy") == json_field(straight_json, "best_test_accuracy"));
    CHECK_THAT(resumed_json, Contains("\"peak_bytes_by_category\":{\"PARAMETER\":"));
  }
  {  // a checkpoint of another precision is refused
    const Outcome other = mg_test::run_program(dir, "resnet", common + "--amp bf16 --resume " + dir.file("resumed.safetensors"));
    CHECK(other.exit_code == 1);
    CHECK_THAT(other.err, Contains("was saved by a run with --amp fp32; this run has --amp bf16"));
  }
  {  // a checkpoint of another schedule is refused
    const Outcome other = mg_test::run_program(dir, "resnet", "--data " + dir.path.string() + " --epochs 3 --batch 4 --threads 2 --resume " +
                                              dir.file("resumed.safetensors"));
    CHECK(other.exit_code == 1);
    CHECK_THAT(other.err, Contains("belongs to a run of 4 steps, but this one has 3 epochs of 2 steps"));
  }
}
