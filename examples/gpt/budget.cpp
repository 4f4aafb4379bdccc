// examples/gpt/budget.cpp — --memory-budget for --bench: the candidates, their evaluation
// on the simulated device, the choice (see the header).
#include "examples/gpt/budget.h"

#include <cstdio>
#include <string>
#include <vector>

#include <memgrad/memory/budget_planner.h>
#include <memgrad/memory/step_cost.h>
#include "examples/common/memory_prediction.h"
#include "examples/common/optimizer_state.h"
#include "examples/gpt/bench.h"

namespace gpt {

namespace {

using examples::OptimizerState;

struct Levers {
  bool checkpoint;
  OptimizerState optimizer_state;
  int64_t micro_batches;
};

Args with_levers(const Args& args, const Levers& levers) {
  Args planned = args;
  planned.checkpoint = levers.checkpoint;
  planned.optimizer_state = levers.optimizer_state;
  planned.batch_size = args.batch_size / levers.micro_batches;
  planned.accum = args.accum * levers.micro_batches;
  planned.memory_budget.reset();
  return planned;
}

}  // namespace

Args plan_bench_for_budget(const Args& args) {
  std::vector<Levers> levers;
  std::vector<mg::memory::PlanCandidate> candidates;
  for (const bool checkpoint : {false, true}) {
    for (const OptimizerState state : {OptimizerState::Device, OptimizerState::EightBit, OptimizerState::Offload,
                                       OptimizerState::OffloadDelayed}) {
      for (int64_t micro_batches = 1; micro_batches <= args.batch_size; micro_batches *= 2) {
        if (args.batch_size % micro_batches != 0) break;
        levers.push_back({checkpoint, state, micro_batches});
        candidates.push_back({.levers = {{"checkpoint", checkpoint ? "every block" : "none"},
                                         {"optimizer", examples::optimizer_state_name(state)},
                                         {"batch", std::to_string(args.batch_size / micro_batches) + " x " +
                                                       std::to_string(args.accum * micro_batches)}}});
      }
    }
  }
  const mg::memory::DeviceRates rates = mg::memory::DeviceRates::h100();
  const int64_t parameters = bench_parameters(args);
  size_t next = 0;
  const auto evaluate = [&](mg::memory::PlanCandidate& candidate) {
    const Levers& chosen = levers[next++];
    const Args planned = with_levers(args, chosen);
    mg::memory::StepCost cost;
    const examples::MemoryPrediction prediction =
        examples::predict_memory(args.device, planned.batch_size, [&](mg::Device device, int64_t batch) {
          Args at_batch = planned;
          at_batch.batch_size = batch;
          return bench_step_memory(at_batch, device, nullptr, &cost, rates);
        });
    candidate.peak_reserved_bytes = prediction.memory.peak_reserved_bytes;
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
      candidate.peak_bytes_by_category[c] = prediction.memory.by_category[c].peak;
    }
    candidate.host_bytes = prediction.host.peak_requested_bytes;
    candidate.step_seconds = cost.seconds();
    if (chosen.optimizer_state == OptimizerState::Offload || chosen.optimizer_state == OptimizerState::OffloadDelayed) {
      // float32 gradients to the host, float32 parameters back.
      candidate.step_seconds += mg::memory::offloaded_update_seconds(
          rates, parameters, 4.0 * static_cast<double>(parameters),
          chosen.optimizer_state == OptimizerState::OffloadDelayed, cost.device_seconds);
    }
  };
  const mg::memory::BudgetPlan plan = mg::memory::plan_for_budget(*args.memory_budget, candidates, evaluate);
  if (args.explain_plan) std::fprintf(stderr, "%s", mg::memory::explain(plan).c_str());
  const mg::memory::PlanCandidate& best = mg::memory::chosen_plan(plan);
  std::fprintf(stderr, "memory budget %lld bytes: %s, predicted peak reserved %lld bytes, step %.2f ms (%s)\n",
               static_cast<long long>(*args.memory_budget), mg::memory::describe_levers(best).c_str(),
               static_cast<long long>(best.peak_reserved_bytes), best.step_seconds * 1e3,
               "step time from memory/step_cost.h's H100 rates");
  return with_levers(args, levers[plan.chosen]);
}

}  // namespace gpt
