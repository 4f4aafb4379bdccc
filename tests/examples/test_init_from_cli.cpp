// tests/examples/test_init_from_cli.cpp — --init-from FILE in the example programs: a new
// run that starts from a checkpoint's model weights (--save-init then writes exactly the
// checkpoint's weights) with a fresh optimizer and schedule at step 0; a checkpoint of
// another size, of another program or a missing file refused with exit code 1 before any
// training step, naming the entry and shapes or the file; --init-from with --resume, or in
// a mode that trains nothing, refused as a usage error (exit code 2).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"
#include "memgrad/core/factory.h"
#include "memgrad/io/safetensors.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::run_ok;
using mg_test::TempDir;

namespace {

const std::string kText = MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt";

// The checkpoint entry `name` (a 0-d tensor) as a number.
double entry_value(const std::string& path, const std::string& name) {
  for (const auto& [key, tensor] : mg::load_safetensors(path)) {
    if (key == name) return tensor.to(mg::DType::Float64).item<double>();
  }
  FAIL("no entry " << name << " in " << path);
  return 0;
}

// The training loss mnist printed for `epoch`.
double epoch_loss(const std::string& out, int epoch) {
  const std::string marker = "epoch " + std::to_string(epoch) + ": train loss ";
  const size_t at = out.find(marker);
  REQUIRE(at != std::string::npos);
  return std::strtod(out.c_str() + at + marker.size(), nullptr);
}

}  // namespace

TEST_CASE("gpt --init-from starts a new run at step 0 from the checkpoint's weights", "[examples][gpt]") {
  TempDir dir("init-from");
  const std::string common = "--data " + kText + " --preset tiny --batch 2 --eval-iters 1 --threads 2 ";
  const std::string saved = dir.file("saved.safetensors");
  run_ok(dir, "gpt", common + "--steps 6 --eval-interval 6 --save " + saved);

  const std::string init = dir.file("init.safetensors"), extended = dir.file("extended.safetensors");
  const Outcome outcome = run_ok(dir, "gpt", common + "--steps 3 --eval-interval 3 --seed 5 --init-from " + saved +
                                                  " --save-init " + init + " --save " + extended);
  CHECK_THAT(outcome.out, Contains("starting from the weights in " + saved));
  CHECK_THAT(outcome.out, !Contains("resumed"));
  // The new run's first weights are the checkpoint's, to the byte (not --seed 5's).
  const auto checkpoint = mg_test::tensor_bytes(saved), first_weights = mg_test::tensor_bytes(init);
  REQUIRE(first_weights.size() > 0);
  for (const auto& [name, bytes] : first_weights) {
    INFO(name);
    REQUIRE(checkpoint.count("model." + name) == 1);
    CHECK(checkpoint.at("model." + name) == bytes);
  }
  // A fresh optimizer and schedule: 3 steps, not 6 + 3.
  CHECK(entry_value(extended, "run.step") == 3);
  CHECK(entry_value(extended, "scheduler.last_epoch") == 3);
  CHECK(entry_value(extended, "optimizer.state.0.step") == 3);

  {  // a checkpoint of another size: the entry and both shapes named, before any step
    const Outcome refused = mg_test::run_program(dir, "gpt", common + "--steps 3 --embd 32 --init-from " + saved);
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Contains("--init-from") && Contains(saved) &&
                                Contains("transformer.wte.weight has shape [256, 32] in the model but [256, 64]"));
    CHECK_THAT(refused.err, !Contains("step 1"));
  }
  {  // a file that is not there
    const Outcome refused = mg_test::run_program(dir, "gpt", common + "--init-from " + dir.file("none.safetensors"));
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Contains("--init-from") && Contains(dir.file("none.safetensors")));
  }
  {  // another program's checkpoint
    mg_test::write_two_class_split(dir, "train", 8, 1);
    mg_test::write_two_class_split(dir, "t10k", 4, 2);
    const Outcome refused =
        mg_test::run_program(dir, "mnist", "--data " + dir.path.string() + " --threads 1 --init-from " + saved);
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Contains("checkpoint '" + saved + "' holds a gpt, not a mnist-mlp"));
  }
}

TEST_CASE("mnist --init-from starts a new run from the weights --save wrote", "[examples]") {
  TempDir dir("init-from");
  mg_test::write_two_class_split(dir, "train", 256, 1);
  mg_test::write_two_class_split(dir, "t10k", 64, 2);
  const std::string common = "--data " + dir.path.string() + " --epochs 1 --batch 32 --lr 1e-4 --threads 1 ";
  const std::string first = dir.file("first.safetensors"), second = dir.file("second.safetensors");
  const Outcome fresh = run_ok(dir, "mnist", common + "--save " + first);
  const Outcome continued = run_ok(dir, "mnist", common + "--init-from " + first + " --save " + second);
  CHECK_THAT(continued.out, Contains("starting from the weights in " + first));
  // It starts where the first run ended: its first epoch's loss is below the fresh run's.
  CHECK(epoch_loss(continued.out, 1) < epoch_loss(fresh.out, 1));
  // A new run: its own step count from 0, not the first run's added to it.
  CHECK(entry_value(second, "run.step") == entry_value(first, "run.step"));
  CHECK(entry_value(second, "run.epoch") == 1);
}

TEST_CASE("the examples refuse --init-from with --resume, or where nothing trains, as a usage error", "[examples]") {
  TempDir dir("init-from");
  const auto [program, arguments, message] = GENERATE(table<std::string, std::string, std::string>({
      {"gpt", "--init-from a --resume b", "--init-from starts a new run from a checkpoint's weights and --resume"},
      {"gpt", "--bench --init-from a", "--init-from is for training: --bench trains nothing"},
      {"gpt", "--predict-memory --init-from a", "--init-from is for training: --predict-memory"},
      {"resnet", "--init-from a --resume b", "--init-from starts a new run from a checkpoint's weights and --resume"},
      {"resnet", "--bench --init-from a", "--init-from is for training: --bench trains nothing"},
      {"mnist", "--predict-memory --init-from a", "--init-from is for training: --predict-memory"},
      {"mnist", "--fit-batch 1000000 --save a", "--save does nothing with --predict-memory or --fit-batch"},
  }));
  mg_test::check_usage_error(dir, program, arguments, message);
}

TEST_CASE("a gpt checkpoint from before mg::save_checkpoint cannot resume, and --init-from takes its weights",
          "[examples][gpt]") {
  TempDir dir("init-from-old");
  const std::string common = "--data " + kText + " --preset tiny --batch 2 --eval-iters 1 --threads 2 ";
  const std::string saved = dir.file("saved.safetensors");
  run_ok(dir, "gpt", common + "--steps 4 --eval-interval 4 --save " + saved);
  // The same run as the examples saved it until 2026-12-07 (commit 875b42c): no marker, no
  // scheduler.* or rng.* entries, the run's position in run.* fields of their own.
  std::vector<std::pair<std::string, mg::Tensor>> old_entries;
  for (auto& [key, tensor] : mg::load_safetensors(saved)) {
    if (key.starts_with("model.") || key.starts_with("optimizer.")) old_entries.emplace_back(key, tensor);
  }
  old_entries.emplace_back("run.steps_done", mg::full({}, 4.0, {.dtype = mg::DType::Int64}));
  std::vector<std::pair<std::string, std::string>> old_metadata;
  for (const auto& [key, value] : mg::read_safetensors_metadata(saved)) {
    if (key != "memgrad_checkpoint") old_metadata.emplace_back(key, value);
  }
  const std::string old = dir.file("old.safetensors");
  mg::save_safetensors(old, old_entries, old_metadata);

  const Outcome refused = mg_test::run_program(dir, "gpt", common + "--steps 8 --resume " + old);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Contains("before 2026-12-07") && Contains("--init-from " + old));
  CHECK_THAT(refused.err, !Contains("step 5"));

  const std::string init = dir.file("init.safetensors");
  const Outcome started = run_ok(dir, "gpt", common + "--steps 2 --eval-interval 2 --init-from " + old +
                                                  " --save-init " + init);
  CHECK_THAT(started.out, Contains("starting from the weights in " + old));
  const auto checkpoint = mg_test::tensor_bytes(old), first_weights = mg_test::tensor_bytes(init);
  REQUIRE(first_weights.size() > 0);
  for (const auto& [name, bytes] : first_weights) {
    INFO(name);
    CHECK(checkpoint.at("model." + name) == bytes);
  }
}
