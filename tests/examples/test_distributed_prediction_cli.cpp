// tests/examples/test_distributed_prediction_cli.cpp — --predict-memory and --fit-batch with
// --distributed --world-size N, as a user runs them: one process, no launcher, predicting
// rank 0 of an N-rank data-parallel run. On the CPU, ZeRO-1's OPTIMIZER_STATE for 2 and 4
// ranks is Adam's state of the rank's padded share of the one parameter group (exact
// bytes), while plain DDP's is the whole state whatever N; the report says "per rank", the
// JSON has the "distributed" section; --fit-batch finds a batch per rank, at most a rank's
// shard; resnet's and gpt's --bench predict a rank of --bench --distributed the same way
// (ZeRO-1 halving the bench optimizer's state on 2 ranks); the flags that do not fit
// together are refused. (That the prediction equals what each rank of `mpirun -np 2`
// measures: test_distributed_cli.cpp.)
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "distributed/scoped_environment.h"
#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::json_integer;
using mg_test::Outcome;
using mg_test::run_ok;
using mg_test::read_file;
using mg_test::TempDir;
using mg_test::write_two_class_split;

namespace {

// A prediction's OPTIMIZER_STATE peak, from its --summary-json.
int64_t predicted_state(const TempDir& dir, const std::string& arguments, const std::string& program = "mnist") {
  const std::string summary = dir.file("prediction.json");
  run_ok(dir, program, arguments + " --summary-json " + summary);
  return json_integer(read_file(summary), "OPTIMIZER_STATE", "peak_bytes_by_category");
}

}  // namespace

TEST_CASE("mnist --predict-memory --distributed --zero predicts ZeRO-1's share of Adam's state per rank",
          "[examples][predict][distributed]") {
  TempDir dir("predict-ranks");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string common = "--data " + dir.path.string() + " --batch 16 --threads 1 --predict-memory --distributed ";

  // Adam: two float32 moments per element and a 4-byte counter per parameter tensor (the
  // MLP's 6); ZeRO-1 keeps the moments of this rank's share of its one group, padded to a
  // multiple of the ranks, and one counter for the group.
  const int64_t plain = predicted_state(dir, common + "--world-size 1");
  const int64_t elements = (plain - 4 * 6) / 8;
  CHECK(plain == 8 * elements + 4 * 6);
  CHECK(predicted_state(dir, common + "--world-size 4") == plain);  // DDP alone shards nothing
  const int64_t one_rank = predicted_state(dir, common + "--world-size 1 --zero");
  CHECK(one_rank == 8 * elements + 4);
  for (const int64_t ranks : {2, 4}) {
    INFO(ranks << " ranks");
    const int64_t share = (elements + ranks - 1) / ranks;
    CHECK(predicted_state(dir, common + "--zero --world-size " + std::to_string(ranks)) == 8 * share + 4);
  }

  const std::string summary = dir.file("two.json");
  const Outcome two = run_ok(dir, "mnist", common + "--zero --world-size 2 --summary-json " + summary);
  CHECK_THAT(two.out, Contains("with ZeRO-1 adam, batch 16 per rank on 2 ranks"));
  CHECK_THAT(two.out, Contains("predicted peak memory per rank (rank 0 of 2, DDP, ZeRO-1) on cpu at batch 16 per rank"));
  const std::string json = read_file(summary);
  CHECK_THAT(json, Contains("\"distributed\":{\"world_size\":2,\"rank\":0,\"ddp\":true,\"zero\":true}"));
  CHECK(json_integer(json, "COMMUNICATION", "peak_bytes_by_category") > 0);  // DDP's broadcast staging
}

TEST_CASE("mnist --fit-batch --distributed finds the largest batch per rank, at most a rank's shard",
          "[examples][predict][distributed]") {
  TempDir dir("predict-ranks-fit");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string summary = dir.file("fit.json");
  const Outcome fit = run_ok(dir, "mnist", "--data " + dir.path.string() +
                                               " --threads 1 --fit-batch 2GB --distributed --world-size 2 --zero "
                                               "--summary-json " + summary);
  CHECK_THAT(fit.out, Contains("largest batch per rank that fits 2000000000 bytes"));
  // Everything fits; a rank's shard of the 256 training images is 128.
  CHECK(json_integer(read_file(summary), "batch_size", "prediction") == 128);
}

TEST_CASE("resnet and gpt --bench --predict-memory --distributed --zero predict ZeRO-1's share of the bench's "
          "optimizer state per rank", "[examples][predict][distributed]") {
  TempDir dir("predict-bench-ranks");
  // The bench's optimizer: resnet's SGD keeps one float32 momentum per element, gpt's AdamW
  // two moments per element and a 4-byte step counter per tensor (ZeRO-1: per group, 2).
  // Both tiny models have an even number of elements in each group, so 2 ranks halve it.
  const auto [program, model, zero_counters] = GENERATE(table<std::string, std::string, int64_t>({
      {"resnet", "--model resnet18 --batch 2", 0},
      {"gpt", "--preset tiny --batch 2", 4 * 2},
  }));
  INFO(program);
  const std::string common = "--bench --predict-memory --threads 1 " + model;
  const int64_t alone = predicted_state(dir, common, program);
  CHECK(predicted_state(dir, common + " --distributed --world-size 2", program) == alone);  // DDP shards nothing
  const int64_t one_rank = predicted_state(dir, common + " --distributed --zero --world-size 1", program);
  const int64_t two_ranks = predicted_state(dir, common + " --distributed --zero --world-size 2", program);
  CHECK(one_rank - zero_counters == 2 * (two_ranks - zero_counters));
  CHECK(two_ranks <= alone / 2 + zero_counters);

  const std::string summary = dir.file("two.json");
  const Outcome two = run_ok(dir, program, common + " --distributed --zero --world-size 2 --summary-json " + summary);
  CHECK_THAT(two.err, Contains("predicted peak memory per rank (rank 0 of 2, DDP, ZeRO-1) on cpu at batch 2 per rank"));
  const std::string json = read_file(summary);
  CHECK(two.out.find(json) != std::string::npos);  // the same line on stdout
  CHECK_THAT(json, Contains("\"distributed\":{\"world_size\":2,\"rank\":0,\"ddp\":true,\"zero\":true}"));
}

TEST_CASE("resnet --bench --fit-batch --distributed finds the largest bench batch per rank",
          "[examples][predict][distributed]") {
  TempDir dir("predict-bench-ranks-fit");
  const std::string summary = dir.file("fit.json");
  const Outcome fit = run_ok(dir, "resnet", "--bench --fit-batch 300MiB --distributed --world-size 2 --model resnet18 "
                                            "--threads 1 --summary-json " + summary);
  CHECK_THAT(fit.err, Contains("largest batch per rank that fits 314572800 bytes"));
  const int64_t batch = json_integer(read_file(summary), "batch_size", "prediction");
  CHECK(batch > 1);
  // The batch found fits, the next does not.
  for (const int64_t at : {batch, batch + 1}) {
    run_ok(dir, "resnet", "--bench --predict-memory --distributed --world-size 2 --model resnet18 --threads 1 --batch " +
                              std::to_string(at) + " --summary-json " + summary);
    CHECK((json_integer(read_file(summary), "peak_reserved_bytes", "memory") <= 314572800) == (at == batch));
  }
}

TEST_CASE("the examples refuse --world-size where no per-rank prediction is asked for, and a prediction under a launcher",
          "[examples][predict][distributed]") {
  TempDir dir("predict-ranks-cli");
  const auto [program, arguments, message] = GENERATE(table<std::string, std::string, std::string>({
      {"mnist", "--predict-memory --world-size 2", "--world-size is the number of ranks a memory prediction is for"},
      {"resnet", "--distributed --world-size 2", "--world-size is the number of ranks a memory prediction is for"},
      {"gpt", "--fit-batch 1GiB --world-size 2", "--world-size is the number of ranks a memory prediction is for"},
      {"mnist", "--predict-memory --distributed --world-size 0", "--world-size must be at least 1, got 0"},
      {"gpt", "--predict-memory --distributed --world-size 9999999", "--world-size must be at most 1048576 ranks"},
      {"resnet", "--predict-memory --zero", "--zero shards the optimizer state over ranks: it needs --distributed"},
  }));
  mg_test::check_usage_error(dir, program, arguments, message);
}

TEST_CASE("a prediction started by a launcher with 2 ranks says to run it once with --world-size",
          "[examples][predict][distributed]") {
  TempDir dir("predict-ranks-launcher");
  const mg_test::ScopedEnvironment launched({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                                             {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  mg_test::check_usage_error(dir, "mnist", "--predict-memory",
                             "without the launcher, with --distributed --world-size 2");
}
