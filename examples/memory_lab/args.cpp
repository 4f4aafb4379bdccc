// examples/memory_lab/args.cpp — the memory_lab program's flags.
#include "examples/memory_lab/args.h"

#include "examples/common/cli.h"
#include "examples/common/output_path.h"
#include "examples/memory_lab/experiment.h"

namespace memory_lab {
namespace {

std::string experiment_names() {
  std::string names;
  for (const Experiment& experiment : all_experiments()) names += (names.empty() ? "" : ", ") + experiment.name;
  return names;
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args args;
  const examples::FlagHandlers flags = {
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--experiment",
       [&](const std::string& value) {
         if (!find_experiment(value)) {
           throw examples::UsageError("unknown experiment '" + value + "'; choose one of " + experiment_names());
         }
         args.experiment = value;
       }},
      {"--json", [&](const std::string& value) { args.json = examples::parse_file_name("--json", value); }},
  };
  const examples::SwitchHandlers switches = {{"--help", [&] { args.help = true; }},
                                             {"-h", [&] { args.help = true; }},
                                             {"--list", [&] { args.list = true; }}};
  const examples::GivenFlags given = examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;
  examples::refuse_ignored_flags(
      given, {{args.list, {"--experiment", "--json"}, "with --list: it names the experiments and exits"}});
  examples::check_output_paths({{"--json", args.json}});
  return args;
}

std::string usage(const std::string& program) {
  return "usage: " + program + R"( [options]
Tests common advice about GPU memory with measured bytes: each experiment states a claim,
measures it with the caching allocator's statistics (bytes by category, allocated and
reserved) and gives a verdict: TRUE, FALSE or PARTLY.

  --device cpu|cuda    where to measure (default cpu)
  --experiment NAME    run one experiment (default: all); --list names them
  --json FILE          write every claim, verdict and measured number as JSON
  --list               list the experiments and their claims, then exit
  --help               show this text
)";
}

}  // namespace memory_lab
