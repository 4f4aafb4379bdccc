// tests/examples/test_checkpoint_faults_cli.cpp — a gpt checkpoint under faults, as a user
// meets them: one flipped bit in the middle of its tensor data makes --resume refuse it,
// naming the file and both checksums (it resumed silently before 2026-12-07); and a run
// killed with SIGKILL at random moments, many times, mostly while it writes its checkpoint
// (a save every step, each one synced to disk), always leaves the previous checkpoint
// whole: every run resumes from it, no temporary file passes for a checkpoint, and the
// run pieced together from 30 killed ones ends exactly as one that was never killed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"
#include "memgrad/core/error.h"
#include "memgrad/io/safetensors.h"

using Catch::Matchers::Contains;
using mg_test::json_field;
using mg_test::Outcome;
using mg_test::read_file;
using mg_test::TempDir;

extern char** environ;

namespace {

const std::string kText = MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt";

// A tiny model, an estimate and a checkpoint after every step: the estimates make a loss
// history a resumed run must reproduce exactly, and most of a step's time is the save
// (its fsync), so that random kills land in it.
std::vector<std::string> gpt_arguments(const std::string& checkpoint, int64_t steps) {
  return {"--data", kText, "--preset", "tiny", "--steps", std::to_string(steps), "--batch", "2",
          "--eval-interval", "1", "--eval-iters", "1", "--threads", "1", "--save", checkpoint};
}

// Starts the gpt program with `arguments`, its output thrown away; returns its process id.
pid_t start_gpt(const std::vector<std::string>& arguments) {
  const std::string program = MG_BINARY_DIR "/gpt";
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(failed == 0);
  return pid;
}

// The step a checkpoint holds, loading the whole file (its checksum checked).
int64_t saved_step(const std::string& path) {
  for (const auto& [name, tensor] : mg::load_safetensors(path)) {
    if (name == "run.step") return tensor.item<int64_t>();
  }
  FAIL("no run.step in " << path);
  return -1;
}

// When the save to `checkpoint` last wrote its temporary file; the minimum when there is none.
std::filesystem::file_time_type temporary_file_time(const std::string& checkpoint) {
  std::error_code missing;
  const auto time = std::filesystem::last_write_time(checkpoint + ".tmp", missing);
  return missing ? std::filesystem::file_time_type::min() : time;
}

// The names of the files in `dir` that end in ".safetensors" (what a glob for checkpoints sees).
std::vector<std::string> checkpoint_files(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    if (entry.path().extension() == ".safetensors") names.push_back(entry.path().filename().string());
  }
  return names;
}

}  // namespace

TEST_CASE("gpt --resume refuses a checkpoint with one flipped bit in its tensor data", "[examples][gpt][faults]") {
  TempDir dir("gpt-faults");
  const std::string checkpoint = dir.file("run.safetensors");
  std::string arguments;
  for (const std::string& argument : gpt_arguments(checkpoint, 4)) arguments += argument + " ";
  REQUIRE(mg_test::run_program(dir, "gpt", arguments).exit_code == 0);

  // The bit in the middle of the data section (after the 8-byte length and the header).
  std::string bytes = read_file(checkpoint);
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  const uint64_t data_start = 8 + header_length;
  const uint64_t middle = data_start + (bytes.size() - data_start) / 2;
  bytes[middle] = static_cast<char>(bytes[middle] ^ 0x08);
  std::ofstream(checkpoint, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  const Outcome refused = mg_test::run_program(dir, "gpt", arguments + "--resume " + checkpoint);
  INFO(refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Contains("safetensors file '" + checkpoint + "' is damaged: its tensor data has checksum "
                                   "(CRC-32) ") &&
                              Contains(" but the file records ") && Contains("Hint: "));
  CHECK(refused.out.empty());  // refused before the run began
}

TEST_CASE("gpt killed with SIGKILL at random moments, mostly while saving, always resumes from a whole checkpoint",
          "[examples][gpt][faults]") {
  // NOTE: about 12 s on the 2-core CPU machine: a straight run of 100 steps (3.6 s), 30
  // killed runs of at most 250 ms each, and the run that finishes the pieced-together one.
  constexpr int64_t kSteps = 100;
  constexpr int kKills = 30;
  TempDir dir("gpt-kills");
  std::string straight_arguments;
  for (const std::string& argument : gpt_arguments(dir.file("straight.safetensors"), kSteps)) {
    straight_arguments += argument + " ";
  }
  REQUIRE(mg_test::run_program(dir, "gpt", straight_arguments + "--summary-json " + dir.file("straight.json"))
              .exit_code == 0);

  const std::string checkpoint = dir.file("killed.safetensors");
  std::mt19937 engine(42);
  // NOTE: kills land in the first `window_ms` of a run, widened (doubling, up to 4 s) after
  // every run killed before its first save: a CUDA build starts more slowly (0.16 s against
  // 0.05 s for the tiny model, 2026-12-07), and a loaded machine more slowly still, so a
  // fixed 250 ms once let all 30 kills land before any save.
  int window_ms = 250;
  int64_t last_step = 0;
  int kills_during_a_save = 0, kills = 0;
  for (int attempt = 0; attempt < kKills; ++attempt) {
    std::vector<std::string> arguments = gpt_arguments(checkpoint, kSteps);
    const bool resumes = std::filesystem::exists(checkpoint);
    if (resumes) arguments.insert(arguments.end(), {"--resume", checkpoint});
    const std::filesystem::file_time_type stale = temporary_file_time(checkpoint);
    const pid_t pid = start_gpt(arguments);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, window_ms)(engine)));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("run " << attempt << (resumes ? " (resumed)" : ""));
    // Killed, or it finished first; never an error (a checkpoint it could not resume from).
    REQUIRE((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0)));
    kills += WIFSIGNALED(status) ? 1 : 0;

    // A temporary file this run wrote (not one an earlier run left) and did not rename.
    if (temporary_file_time(checkpoint) != stale) ++kills_during_a_save;
    // Only the checkpoint itself looks like one; it loads whole (checksum and all) and
    // holds no fewer steps than before.
    // NOTE: a run may be killed before its first save (see window_ms).
    const bool saved = std::filesystem::exists(checkpoint);
    if (!saved) window_ms = std::min(2 * window_ms, 4000);
    const std::vector<std::string> visible = checkpoint_files(dir);
    CHECK(std::count(visible.begin(), visible.end(), "killed.safetensors") == (saved ? 1 : 0));
    CHECK(visible.size() == (saved ? 2 : 1));  // and straight.safetensors
    if (!saved) continue;
    int64_t step = -1;
    REQUIRE_NOTHROW(step = saved_step(checkpoint));
    CHECK(step >= last_step);
    last_step = step;
  }
  INFO(kills << " runs killed, " << kills_during_a_save << " of them while writing the checkpoint, the last at step "
             << last_step);
  CHECK(kills >= kKills / 2);
  CHECK(kills_during_a_save >= 1);  // the kills did reach the saves

  // The pieced-together run, finished, is the straight one: every estimate and every byte
  // of the final state (but the wall-clock times).
  std::string arguments;
  for (const std::string& argument : gpt_arguments(checkpoint, kSteps)) arguments += argument + " ";
  if (std::filesystem::exists(checkpoint)) arguments += "--resume " + checkpoint + " ";
  REQUIRE(mg_test::run_program(dir, "gpt", arguments + "--summary-json " + dir.file("killed.json")).exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(checkpoint + ".tmp"));  // the last save took the stale one's place
  mg_test::check_same_checkpoint(dir.file("straight.safetensors"), checkpoint);
  const std::string straight_json = read_file(dir.file("straight.json"));
  const std::string killed_json = read_file(dir.file("killed.json"));
  for (const char* key : {"val_loss_per_eval", "eval_steps", "val_loss", "best_val_loss"}) {
    INFO(key);
    CHECK(json_field(killed_json, key) == json_field(straight_json, key));
  }
}
