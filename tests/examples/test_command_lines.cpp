// tests/examples/test_command_lines.cpp — the example programs' command lines as a user
// mistypes them: every mistake is refused before any work, with exit code 2 and one line
// (mg_test::check_usage_error): an unknown flag names the nearest known one; an output
// path that cannot be written (no such folder, permission denied, a folder) names its
// flag, the path and why; and every combination whose flag would silently do nothing is
// refused. The table of those combinations is below, one row per (mode, ignored flags);
// each program's args.cpp holds the same table (examples::refuse_ignored_flags). Combinations
// that work stay accepted: the last test runs the ones scripts/gpu-check relies on.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

const std::string kText = MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt";
const std::string kMissingFolder = "/nonexistent-memgrad-folder";

}  // namespace

TEST_CASE("an unknown flag gets one line naming the nearest known flag", "[examples][cli]") {
  TempDir dir("command-lines");
  const auto [program, arguments, message] = GENERATE(table<std::string, std::string, std::string>({
      {"mnist", "--epoch 2", "unknown flag '--epoch'; did you mean --epochs?"},
      {"mnist", "--predict", "unknown flag '--predict'; did you mean --predict-memory?"},
      {"mnist", "-batch 4", "unexpected argument '-batch'; did you mean --batch?"},
      {"mnist", "--bogus 1", "unknown flag '--bogus'"},
      {"resnet", "--chanels-last", "unknown flag '--chanels-last'; did you mean --channels-last?"},
      {"resnet", "--bench=1", "--bench takes no value, got '1'"},
      {"gpt", "--stpes=10", "unknown flag '--stpes'; did you mean --steps?"},
      {"gpt", "--temprature 0.5", "unknown flag '--temprature'; did you mean --temperature?"},
      {"memory_lab", "--experimnt no_grad", "unknown flag '--experimnt'; did you mean --experiment?"},
      // --checkpoint takes an optional word: the next argument, unless it is a flag.
      {"gpt", "--checkpoint sometimes", "--checkpoint takes none, selective, whole or offload (alone: whole), got 'sometimes'"},
      {"resnet", "--checkpoint=all", "--checkpoint takes none, selective, whole or offload (alone: whole), got 'all'"},
  }));
  mg_test::check_usage_error(dir, program, arguments, message);
}

TEST_CASE("an output path that cannot be written is refused with the command line", "[examples][cli]") {
  TempDir dir("command-lines");
  const std::string folder = dir.path.string();
  // NOTE: a loop, not GENERATE, whose values would name the first run's folder.
  std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"mnist", "--summary-json " + kMissingFolder + "/s.json",
       "--summary-json '" + kMissingFolder + "/s.json': no such folder '" + kMissingFolder + "'"},
      {"mnist", "--memory-timeline " + folder, "--memory-timeline '" + folder + "' is a folder"},
      {"mnist", "--summary-json " + dir.file("a") + " --memory-timeline " + dir.file("a"),
       "--summary-json and --memory-timeline name the same file"},
      {"resnet", "--save " + kMissingFolder + "/r.safetensors", "--save '" + kMissingFolder + "/r.safetensors': no such folder"},
      {"resnet", "--bench --summary-json " + folder, "--summary-json '" + folder + "' is a folder"},
      {"gpt", "--save " + kMissingFolder + "/m.safetensors", "--save '" + kMissingFolder + "/m.safetensors': no such folder"},
      {"gpt", "--save-init " + folder, "--save-init '" + folder + "' is a folder"},
      {"gpt", "--dump-windows " + kMissingFolder + "/w", "--dump-windows '" + kMissingFolder + "/w': no such folder"},
      {"gpt", "--bench --memory-timeline " + kMissingFolder + "/t.html", "--memory-timeline '" + kMissingFolder},
      {"gpt", "--save " + dir.file("m") + " --save-init " + dir.file("m"), "--save and --save-init name the same file"},
      {"gpt", "--memory-snapshot " + folder, "--memory-snapshot '" + folder + "' is a folder"},
      {"resnet", "--memory-trace " + kMissingFolder + "/t.json", "--memory-trace '" + kMissingFolder},
      {"mnist", "--memory-trace " + dir.file("a") + " --memory-timeline " + dir.file("a"),
       "--memory-timeline and --memory-trace name the same file"},
      {"memory_lab", "--json " + kMissingFolder + "/lab.json", "--json '" + kMissingFolder + "/lab.json': no such folder"},
  };
  if (std::filesystem::is_directory("/sys")) {  // sysfs refuses new files, even to root
    cases.emplace_back("gpt", "--summary-json /sys/s.json",
                       "--summary-json '/sys/s.json' cannot be written: permission denied in folder '/sys'");
    cases.emplace_back("resnet", "--memory-timeline /sys/t.html", "permission denied in folder '/sys'");
  }
  for (const auto& [program, arguments, message] : cases) mg_test::check_usage_error(dir, program, arguments, message);
}

TEST_CASE("a training run with an unwritable --save stops before its first step", "[examples][cli]") {
  TempDir dir("command-lines");
  mg_test::write_two_class_split(dir, "train", 64, 1);
  mg_test::write_two_class_split(dir, "t10k", 16, 2);
  // The runs these command lines start take seconds to minutes; refused, they end at once
  // and print nothing of a run (its setup lines go to stdout, its progress to stderr).
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"gpt", "--data " + kText + " --preset tiny --steps 300 --batch 8 --threads 2 --save " + kMissingFolder + "/m"},
      {"resnet", "--data " + dir.path.string() + " --epochs 2 --batch 8 --threads 2 --save " + kMissingFolder + "/r"},
      {"mnist", "--data " + dir.path.string() + " --epochs 3 --threads 2 --summary-json " + kMissingFolder + "/s.json"},
  };
  for (const auto& [program, arguments] : runs) {
    const auto start = std::chrono::steady_clock::now();
    mg_test::check_usage_error(dir, program, arguments, "no such folder '" + kMissingFolder + "'");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
}

// The combinations that would silently do nothing. Modes: mnist trains or predicts
// (--predict-memory/--fit-batch); resnet and gpt also time steps on random inputs
// (--bench, itself predictable); gpt also writes its training windows and exits
// (--dump-windows); memory_lab runs experiments or lists them (--list). Settings of the
// run (--lr, --epochs, --eval-iters, ...) stay accepted with a prediction, which predicts
// the run they describe; what is refused is what the mode leaves out: outputs it does not
// write, inputs it does not read, behaviour it does not have.
TEST_CASE("every combination whose flag would do nothing is refused, naming the flags", "[examples][cli]") {
  TempDir dir("command-lines");
  const auto [program, arguments, message] = GENERATE(table<std::string, std::string, std::string>({
      // mnist
      {"mnist", "--predict-memory --memory-timeline t.html", "--memory-timeline does nothing with --predict-memory or --fit-batch"},
      {"mnist", "--fit-batch 1GiB --memory-timeline t.html", "--memory-timeline does nothing with --predict-memory or --fit-batch"},
      {"mnist", "--fit-batch 1GiB --batch 64", "--batch does nothing with --fit-batch: it searches the batch itself"},
      {"mnist", "--fit-batch 1GiB --predict-memory", "--predict-memory does nothing with --fit-batch"},
      // resnet
      {"resnet", "--bench --data d", "--data does nothing with --bench"},
      {"resnet", "--bench --epochs 3 --limit 100 --lr 0.2", "--epochs, --limit and --lr do nothing with --bench"},
      {"resnet", "--bench --augment --save s --resume r --stop-after 1",
       "--augment, --save, --resume and --stop-after do nothing with --bench"},
      {"resnet", "--steps 5", "--steps does nothing without --bench"},
      {"resnet", "--warmup 2", "--warmup does nothing without --bench"},
      {"resnet", "--predict-memory --save s", "--save does nothing with --predict-memory or --fit-batch"},
      {"resnet", "--predict-memory --resume r", "--resume does nothing with --predict-memory or --fit-batch"},
      {"resnet", "--bench --predict-memory --memory-timeline t.html", "--memory-timeline does nothing with --predict-memory"},
      {"resnet", "--bench --fit-batch 1GiB --batch 8", "--batch does nothing with --fit-batch"},
      {"resnet", "--cudnn-benchmark --no-cudnn-fusion", "--no-cudnn-fusion and --cudnn-benchmark do nothing with --device cpu"},
      {"resnet", "--bench --dependent-launch --no-cudnn-backward-fusion",
       "--no-cudnn-backward-fusion and --dependent-launch do nothing with --device cpu"},
      {"resnet", "--epochs 2 --stop-after 3", "--stop-after 3 is past the run's end (--epochs 2)"},
      // gpt
      {"gpt", "--bench --predict-memory --memory-timeline f.html", "--memory-timeline does nothing with --predict-memory or --fit-batch"},
      {"gpt", "--bench --data t.txt --lr 0.1", "--data and --lr do nothing with --bench"},
      {"gpt", "--bench --eval-interval 10 --eval-iters 5", "--eval-interval and --eval-iters do nothing with --bench"},
      {"gpt", "--bench --stop-after 3 --save-init i", "--stop-after and --save-init do nothing with --bench"},
      {"gpt", "--bench --sample 10 --temperature 0.5", "--sample and --temperature do nothing with --bench"},
      {"gpt", "--bench --dump-windows w", "--dump-windows does nothing with --bench"},
      {"gpt", "--dump-windows w --summary-json s.json", "--summary-json does nothing with --dump-windows"},
      {"gpt", "--dump-windows w --save s --resume r", "--save and --resume do nothing with --dump-windows"},
      {"gpt", "--dump-windows w --memory-timeline t.html --sample 5", "--memory-timeline and --sample do nothing with --dump-windows"},
      {"gpt", "--dump-windows w --detect-anomaly", "--detect-anomaly does nothing with --dump-windows"},
      {"gpt", "--dump-windows w --fit-batch 1GiB", "--fit-batch does nothing with --dump-windows"},
      {"gpt", "--predict-memory --memory-timeline t.html", "--memory-timeline does nothing with --predict-memory or --fit-batch"},
      {"gpt", "--predict-memory --save-init i", "--save-init does nothing with --predict-memory or --fit-batch"},
      {"gpt", "--fit-batch 1GiB --sample 20 --top-k 5", "--sample and --top-k do nothing with --predict-memory or --fit-batch"},
      {"gpt", "--fit-batch 1GiB --batch 4", "--batch does nothing with --fit-batch"},
      {"gpt", "--bench --fit-batch 1GiB --predict-memory", "--predict-memory does nothing with --fit-batch"},
      {"gpt", "--prompt Once", "--prompt does nothing without --sample N"},
      {"gpt", "--no-kv-cache", "--no-kv-cache does nothing without --sample N"},
      {"gpt", "--top-k 3 --temperature 2", "--temperature and --top-k do nothing without --sample N"},
      {"gpt", "--steps 10 --stop-after 20", "--stop-after 20 is past the run's end (--steps 10)"},
      // memory_lab
      {"memory_lab", "--list --json lab.json", "--json does nothing with --list"},
      {"memory_lab", "--list --experiment no_grad", "--experiment does nothing with --list"},
  }));
  mg_test::check_usage_error(dir, program, arguments, message);
}

TEST_CASE("the combinations that work stay accepted", "[examples][cli]") {
  TempDir dir("command-lines");
  auto run_ok = [&](const std::string& program, const std::string& arguments) {
    const Outcome outcome = mg_test::run_program(dir, program, arguments);
    INFO(program << " " << arguments << "\n" << outcome.err);
    CHECK(outcome.exit_code == 0);
    return outcome;
  };
  // scripts/gpu-check: the windows of a training command line (its settings included), and
  // a bench's command line predicted (its --steps and --warmup included).
  run_ok("gpt", "--data " + kText + " --preset tiny --dropout 0 --steps 1000 --batch 4 --eval-interval 250 "
                "--eval-iters 50 --seed 0 --steps 2 --dump-windows " + dir.file("w.safetensors"));
  CHECK(std::filesystem::exists(dir.file("w.safetensors")));
  run_ok("gpt", "--bench --preset tiny --batch 2 --warmup 1 --steps 20 --threads 2 --predict-memory");
  // A training command line with --predict-memory appended: its settings describe the run.
  run_ok("gpt", "--data " + kText + " --preset tiny --batch 2 --lr 3e-3 --eval-interval 5 --eval-iters 2 "
                "--stop-after 3 --threads 2 --predict-memory --summary-json " + dir.file("p.json"));
  CHECK(std::filesystem::exists(dir.file("p.json")));
  // --help wins over any mistake after it.
  CHECK_THAT(run_ok("gpt", "--help --bench --save x").out, Contains("usage: gpt"));
  CHECK_THAT(run_ok("resnet", "--help").out, Contains("--threads N") && Contains("as PyTorch"));
}
