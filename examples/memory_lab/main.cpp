// examples/memory_lab/main.cpp — runs the memory experiments: for each, the claim as
// tutorials state it, what the caching allocator measured, and a verdict; then a table of
// all verdicts, and with --json every number for scripts (tests/examples asserts them).
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command
// line (printed as one line, before any work).
#include <cstdio>
#include <vector>

#include "examples/common/cli.h"
#include "examples/common/summary.h"
#include "examples/memory_lab/args.h"
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/models.h"
#include "examples/memory_lab/report.h"

namespace {

using memory_lab::Args;
using memory_lab::Experiment;

int run(const Args& args) {
  if (args.list) {
    for (const Experiment& experiment : memory_lab::all_experiments()) {
      std::printf("%-16s %s\n", experiment.name.c_str(), experiment.claim.c_str());
    }
    return 0;
  }
  std::vector<const Experiment*> selected;
  for (const Experiment& experiment : memory_lab::all_experiments()) {
    if (args.experiment.empty() || experiment.name == args.experiment) selected.push_back(&experiment);
  }
  std::printf("memory lab on %s: bytes measured by the caching allocator (requested bytes by category; "
              "allocated and reserved as it rounds and caches them)\n\n",
              args.device.str().c_str());
  memory_lab::warm_up(args.device);
  std::vector<memory_lab::Outcome> outcomes;
  for (const Experiment* experiment : selected) {
    outcomes.emplace_back(experiment, experiment->run(args.device));
    std::printf("%s\n", memory_lab::format_block(*experiment, outcomes.back().second).c_str());
    std::fflush(stdout);
  }
  std::printf("%s", memory_lab::format_table(outcomes).c_str());
  if (!args.json.empty()) {
    examples::write_file_atomically(args.json, memory_lab::to_json(args.device, outcomes));
    std::printf("results written to %s\n", args.json.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "memory_lab",
      [&](int count, char** values) {
        args = memory_lab::parse_args(count, values);
        return !args.help;
      },
      memory_lab::usage, [&] { return run(args); });
}
