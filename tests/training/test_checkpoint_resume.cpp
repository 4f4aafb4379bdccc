// tests/training/test_checkpoint_resume.cpp — a run saved mid-way by mg::save_checkpoint and
// loaded by mg::load_checkpoint in a fresh process continues bit for bit: N steps straight
// end in the same file as K steps, a save, a new process that loads and runs N - K steps.
// Each part is needed: a resume that leaves out one of them (the default generator that
// dropout draws from, the data generator, the schedule, the scaler, the optimizer) ends
// elsewhere, so the comparison sees every part.
//
// The processes are this test program itself, run again on the hidden test case below
// with MG_CHECKPOINT_CHILD="<steps> <save path> [<load path> [<part left out>]]".
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "data/mnist_test_files.h"
#include "training/small_run.h"

namespace {

using mg_test::file_bytes;
using mg_test::kRunSteps;
using mg_test::SmallRun;
using mg_test::TempDir;

// Runs this program on the child test case; returns its exit code.
int run_child(const std::string& arguments) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command =
      "MG_CHECKPOINT_CHILD='" + arguments + "' '" + self + "' 'checkpoint: a child process trains and saves' >/dev/null";
  return std::system(command.c_str());
}

}  // namespace

TEST_CASE("checkpoint: a child process trains and saves", "[.][checkpoint-child]") {
  const char* arguments = std::getenv("MG_CHECKPOINT_CHILD");
  REQUIRE(arguments != nullptr);
  std::istringstream words(arguments);
  int64_t steps = 0;
  std::string save_path, load_path, left_out;
  words >> steps >> save_path >> load_path >> left_out;
  SmallRun run;
  if (!load_path.empty()) {
    mg::CheckpointTargets targets = run.targets();
    if (left_out == "default_generator") targets.default_generator = false;
    if (left_out == "data") targets.generators.clear();
    if (left_out == "scheduler") targets.scheduler = nullptr;
    if (left_out == "scaler") targets.scaler = nullptr;
    if (left_out == "optimizer") targets.optimizer = nullptr;
    run.step = mg::load_checkpoint(load_path, targets).step;
  }
  run.train(steps);
  mg::save_checkpoint(save_path, run.parts());
}

TEST_CASE("checkpoint: a run resumed in a fresh process ends bit for bit where a straight run ends",
          "[training][checkpoint]") {
  TempDir dir("checkpoint-resume");
  const std::string straight = dir.file("straight.safetensors"), middle = dir.file("middle.safetensors"),
                    resumed = dir.file("resumed.safetensors");
  constexpr int64_t kFirst = 3;
  REQUIRE(run_child(std::to_string(kRunSteps) + " " + straight) == 0);
  REQUIRE(run_child(std::to_string(kFirst) + " " + middle) == 0);
  REQUIRE(run_child(std::to_string(kRunSteps - kFirst) + " " + resumed + " " + middle) == 0);

  const auto expected = file_bytes(straight), actual = file_bytes(resumed), halfway = file_bytes(middle);
  REQUIRE(expected.size() == actual.size());
  for (const auto& [name, bytes] : expected) {
    INFO(name);
    REQUIRE(actual.count(name) == 1);
    CHECK(actual.at(name) == bytes);
  }
  // Every part moved between the save and the end (else the comparison would not see it).
  for (const char* name : {"model.0.weight", "optimizer.state.0.exp_avg", "scaler.scale", "scheduler.last_lrs",
                           "rng.default", "rng.data", "run.step"}) {
    INFO(name);
    REQUIRE(halfway.count(name) == 1);
    CHECK(halfway.at(name) != expected.at(name));
  }

  // A resume that leaves one part out ends elsewhere.
  for (const std::string left_out : {"default_generator", "data", "scheduler", "scaler", "optimizer"}) {
    INFO("resumed without " << left_out);
    const std::string path = dir.file("without-" + left_out + ".safetensors");
    REQUIRE(run_child(std::to_string(kRunSteps - kFirst) + " " + path + " " + middle + " " + left_out) == 0);
    CHECK(file_bytes(path) != expected);
  }
}
