// examples/common/budget_plan.h — the examples' `--memory-budget BYTES [--explain-plan]`:
// the fastest step that fits BYTES, chosen by mg::memory::plan_for_budget among every
// combination of the levers a program has:
//   checkpointing      none, selective (matmul and attention outputs kept, or a ResNet's
//                      convolutions), whole blocks, or for a GPU every block's saved
//                      activations offloaded to the host (--checkpoint
//                      none|selective|whole|offload)
//   optimizer state    the --optimizer-state values the program's optimizer takes
//   micro-batching     --batch B --accum A as --batch B/m --accum A*m, for every m = 1, 2,
//                      4, ... dividing B (the same samples and loss weights each step)
// With --bench the step planned is the bench's; otherwise the training run's: its peak
// spans the steps and the evaluation batch --predict-memory runs, so the plan fits the whole
// run. Each plan's peak reserved bytes are predicted on the simulated device for --device
// (exact, as --predict-memory), its step time by memory/step_cost.h's H100 rates, with an
// offloaded optimizer's host update and copies added. The program then runs (or predicts,
// with --predict-memory) the chosen plan as if its flags had been given; a training run also
// caps what the allocator may reserve at the budget (--memory-cap, unless given smaller), so
// that a step that would not fit ends with out of memory instead of passing the budget.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/memory/step_cost.h>
#include <memgrad/nn/block_checkpoint.h>
#include "examples/common/cli.h"
#include "examples/common/optimizer_state.h"

namespace examples {

struct BudgetFlags {
  std::optional<int64_t> budget_bytes;  // --memory-budget BYTES
  bool explain = false;                 // --explain-plan
  void add_to(FlagHandlers& flags, SwitchHandlers& switches);
};

// The budget's lines for a usage text.
std::string budget_usage();

// Throws UsageError where a budget cannot be planned: with a lever given by hand
// (`levers_given`: --checkpoint, --optimizer-state, --accum as the program names them), with
// --distributed, --fit-batch, --cuda-graph or --auto-accum (which would change the plan's
// micro-batches mid-run); and --explain-plan without a budget.
void check_budget_flags(const BudgetFlags& budget, const std::vector<std::string>& levers_given, bool distributed,
                        bool fit_batch, bool cuda_graph, bool auto_accum);

struct BudgetLevers {
  mg::nn::BlockCheckpoint checkpoint = mg::nn::BlockCheckpoint::None;
  OptimizerState optimizer_state = OptimizerState::Device;
  int64_t micro_batches = 1;
};

// What the planner predicted for the plan it chose: a bench's JSON line carries it beside
// what was measured (write_planned_step), so that a run shows prediction against measurement.
struct PlannedStep {
  int64_t budget_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  double step_seconds = 0;
};

// "memory_budget_bytes", "predicted_peak_reserved_bytes" and "predicted_step_ms", when the
// run was planned for a budget; nothing otherwise.
void write_planned_step(mg::JsonWriter& json, const std::optional<PlannedStep>& planned);

struct BudgetChoice {
  BudgetLevers levers;
  PlannedStep predicted;
};

// A program's arguments with `levers` applied (and no budget left to plan), the allocator
// capped at the budget: any Args with checkpoint, optimizer_state, batch_size, accum,
// out_of_memory, budget and planned_step members, as gpt's and resnet's.
template <class Args>
Args with_levers(const Args& args, const BudgetLevers& levers) {
  Args planned = args;
  planned.checkpoint = levers.checkpoint;
  planned.optimizer_state = levers.optimizer_state;
  planned.batch_size = args.batch_size / levers.micro_batches;
  planned.accum = args.accum * levers.micro_batches;
  if (args.budget.budget_bytes &&
      (!planned.out_of_memory.memory_cap || *planned.out_of_memory.memory_cap > *args.budget.budget_bytes)) {
    planned.out_of_memory.memory_cap = args.budget.budget_bytes;
  }
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

// The step planned (the bench's, or the training run's steps and evaluation batch) with
// `levers` on `device` (the simulated one), micro-batches of `batch`: the allocator's state
// after it, and in `cost` the cost of one optimizer step.
using CostedStep = std::function<mg::memory::Snapshot(const BudgetLevers& levers, mg::Device device, int64_t batch,
                                                      mg::memory::StepCost* cost)>;

// The fastest levers that fit and what they were predicted to take; prints the choice (and
// with explain every plan) to stderr. Throws the planner's mg::Error when none fits.
BudgetChoice choose_levers(const BudgetProblem& problem, const CostedStep& step);

// `args` with the levers choose_levers picks for `problem`, each plan evaluated by `step` on
// `args` with that plan's levers (with_levers) and micro-batch size (batch_size): the
// allocator's state after it on the simulated `device`, the cost of an optimizer step in
// `cost`.
template <class Args>
Args plan_levers(const Args& args, const BudgetProblem& problem,
                 const std::function<mg::memory::Snapshot(const Args& planned, mg::Device device,
                                                          mg::memory::StepCost* cost)>& step) {
  const BudgetChoice choice = choose_levers(
      problem, [&](const BudgetLevers& levers, mg::Device device, int64_t batch, mg::memory::StepCost* cost) {
        Args planned = with_levers(args, levers);
        planned.batch_size = batch;
        return step(planned, device, cost);
      });
  Args planned = with_levers(args, choice.levers);
  planned.planned_step = choice.predicted;
  return planned;
}

}  // namespace examples
