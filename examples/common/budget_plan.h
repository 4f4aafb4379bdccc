// examples/common/budget_plan.h — the examples' `--bench --memory-budget BYTES
// [--explain-plan]`: the fastest bench step that fits BYTES, chosen by
// mg::memory::plan_for_budget among every combination of the levers a program has:
//   checkpointing      none, selective (matmul and attention outputs kept, or a ResNet's
//                      convolutions) or whole blocks (--checkpoint none|selective|whole)
//   optimizer state    the --optimizer-state values the program's optimizer takes
//   micro-batching     --batch B --accum A as --batch B/m --accum A*m, for every m = 1, 2,
//                      4, ... dividing B (the same samples and loss weights each step)
// Each plan's peak reserved bytes are predicted on the simulated device for --device
// (exact, as --predict-memory), its step time by memory/step_cost.h's H100 rates, with an
// offloaded optimizer's host update and copies added. The program then runs (or predicts,
// with --predict-memory) the chosen plan as if its flags had been given.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/memory/step_cost.h>
#include <memgrad/nn/block_checkpoint.h>
#include "examples/common/cli.h"
#include "examples/common/optimizer_state.h"

namespace examples {

struct BudgetFlags {
  std::optional<int64_t> budget_bytes;  // --memory-budget
  bool explain = false;                 // --explain-plan
  void add_to(FlagHandlers& flags, SwitchHandlers& switches);
};

// The budget's lines for a usage text.
std::string budget_usage();

// Throws UsageError where a budget cannot be planned: without --bench (a training run is not
// planned yet), with a lever given by hand (`levers_given`: --checkpoint, --optimizer-state,
// --accum as the program names them), with --distributed, --fit-batch or --cuda-graph; and
// --explain-plan without a budget.
void check_budget_flags(const BudgetFlags& budget, bool bench, const std::vector<std::string>& levers_given,
                        bool distributed, bool fit_batch, bool cuda_graph);

struct BudgetLevers {
  mg::nn::BlockCheckpoint checkpoint = mg::nn::BlockCheckpoint::None;
  OptimizerState optimizer_state = OptimizerState::Device;
  int64_t micro_batches = 1;
};

// A program's arguments with `levers` applied (and no budget left to plan): any Args with
// checkpoint, optimizer_state, batch_size, accum and budget members, as gpt's and resnet's.
template <class Args>
Args with_levers(const Args& args, const BudgetLevers& levers) {
  Args planned = args;
  planned.checkpoint = levers.checkpoint;
  planned.optimizer_state = levers.optimizer_state;
  planned.batch_size = args.batch_size / levers.micro_batches;
  planned.accum = args.accum * levers.micro_batches;
  planned.budget = {};
  return planned;
}

struct BudgetProblem {
  int64_t budget_bytes = 0;
  bool explain = false;
  mg::Device target;
  int64_t batch_size = 0;  // --batch
  int64_t accum = 1;       // --accum
  std::vector<OptimizerState> optimizer_states;  // the ones the program's optimizer takes
  int64_t parameters = 0;  // float32 elements an offloaded optimizer updates on the host
};

// The bench step with `levers` on `device` (the simulated one), micro-batches of `batch`:
// the allocator's state after it (measure_costed_peak_step), its cost in `cost`.
using CostedBenchStep = std::function<mg::memory::Snapshot(const BudgetLevers& levers, mg::Device device,
                                                           int64_t batch, mg::memory::StepCost* cost)>;

// The fastest levers that fit; prints the choice (and with explain every plan) to stderr.
// Throws the planner's mg::Error when none fits.
BudgetLevers choose_levers(const BudgetProblem& problem, const CostedBenchStep& step);

}  // namespace examples
