// examples/common/budget_plan.cpp — --memory-budget: its flags, the candidate levers, their
// evaluation on the simulated device, the choice (see the header).
#include "examples/common/budget_plan.h"

#include <cstdio>

#include <memgrad/memory/budget_planner.h>
#include "examples/common/memory_prediction.h"

namespace examples {

void BudgetFlags::add_to(FlagHandlers& flags, SwitchHandlers& switches) {
  flags["--memory-budget"] = [this](const std::string& value) {
    budget_bytes = parse_bytes("--memory-budget", value);
  };
  switches["--explain-plan"] = [this] { explain = true; };
}

std::string budget_usage() {
  return R"(  --memory-budget BYTES    choose the fastest step that fits BYTES (e.g. 24GiB) among
                           every combination of checkpointing (none, selective, whole;
                           for a GPU also offload),
                           the optimizer's state and micro-batching (--batch B as B/m
                           samples x m micro-batches): each one's peak predicted
                           exactly on the simulated device, its time by an
                           H100-calibrated cost model; then train, --bench or
                           --predict-memory with the chosen one (a training run's
                           allocator capped at BYTES). Refuses a budget nothing fits,
                           naming the smallest that would
  --explain-plan           with --memory-budget: print every plan weighed (peak, time,
                           why not chosen)
)";
}

void check_budget_flags(const BudgetFlags& budget, const std::vector<std::string>& levers_given, bool distributed,
                        bool fit_batch, bool cuda_graph, bool auto_accum) {
  if (!budget.budget_bytes) {
    if (budget.explain) throw UsageError("--explain-plan prints the plans --memory-budget BYTES weighs; give a budget");
    return;
  }
  if (!levers_given.empty()) {
    throw UsageError(levers_given.front() + " is one of the levers --memory-budget chooses; leave it out "
                     "(--explain-plan shows the plans)");
  }
  if (distributed || fit_batch || cuda_graph) {
    throw UsageError("--memory-budget plans one process's step; it does not go with --distributed, --fit-batch or "
                     "--cuda-graph");
  }
  if (auto_accum) {
    throw UsageError("--memory-budget chooses the micro-batches that fit before the run starts; --auto-accum, which "
                     "splits them after an out-of-memory, does not go with it");
  }
}

void write_planned_step(mg::JsonWriter& json, const std::optional<PlannedStep>& planned) {
  if (!planned) return;
  json.key("memory_budget_bytes").value(planned->budget_bytes)
      .key("predicted_peak_reserved_bytes").value(planned->peak_reserved_bytes)
      .key("predicted_step_ms").value(planned->step_seconds * 1e3);
}

BudgetChoice choose_levers(const BudgetProblem& problem, const CostedStep& step) {
  std::vector<BudgetLevers> levers;
  std::vector<mg::memory::PlanCandidate> candidates;
  std::vector<mg::nn::BlockCheckpoint> checkpoints = {
      mg::nn::BlockCheckpoint::None, mg::nn::BlockCheckpoint::Selective, mg::nn::BlockCheckpoint::Whole};
  // On the CPU the activations are in host memory already: offloading them changes nothing.
  if (problem.target.is_cuda()) checkpoints.push_back(mg::nn::BlockCheckpoint::Offload);
  for (const mg::nn::BlockCheckpoint checkpoint : checkpoints) {
    for (const OptimizerState state : problem.optimizer_states) {
      for (int64_t micro_batches = 1; micro_batches <= problem.batch_size; micro_batches *= 2) {
        if (problem.batch_size % micro_batches != 0) break;
        levers.push_back({checkpoint, state, micro_batches});
        mg::memory::PlanCandidate candidate;
        candidate.levers = {{"checkpoint", mg::nn::block_checkpoint_name(checkpoint)},
                            {"optimizer-state", optimizer_state_name(state)},
                            {"batch", std::to_string(problem.batch_size / micro_batches) + " x " +
                                          std::to_string(problem.accum * micro_batches)}};
        candidates.push_back(candidate);
      }
    }
  }
  const mg::memory::DeviceRates rates = mg::memory::DeviceRates::h100();
  size_t next = 0;
  const auto evaluate = [&](mg::memory::PlanCandidate& candidate) {
    const BudgetLevers& these = levers[next++];
    mg::memory::StepCost cost;
    const MemoryPrediction prediction = predict_memory(
        problem.target, problem.batch_size / these.micro_batches,
        [&](mg::Device device, int64_t batch) { return step(these, device, batch, &cost); });
    candidate.peak_reserved_bytes = prediction.memory.peak_reserved_bytes;
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
      candidate.peak_bytes_by_category[c] = prediction.memory.by_category[c].peak;
    }
    candidate.host_bytes = prediction.host.peak_requested_bytes;
    candidate.step_seconds = cost.seconds();
    if (these.optimizer_state == OptimizerState::Offload || these.optimizer_state == OptimizerState::OffloadDelayed) {
      // float32 gradients to the host, float32 parameters back.
      candidate.step_seconds += mg::memory::offloaded_update_seconds(
          rates, problem.parameters, 4.0 * static_cast<double>(problem.parameters),
          these.optimizer_state == OptimizerState::OffloadDelayed, cost.device_seconds);
    }
  };
  const mg::memory::BudgetPlan plan = mg::memory::plan_for_budget(problem.budget_bytes, candidates, evaluate);
  if (problem.explain) std::fprintf(stderr, "%s", mg::memory::explain(plan).c_str());
  const mg::memory::PlanCandidate& best = mg::memory::chosen_plan(plan);
  std::fprintf(stderr,
               "memory budget %lld bytes: %s; predicted peak reserved %lld bytes, step %.2f ms (memory/step_cost.h's "
               "H100 rates)\n",
               static_cast<long long>(problem.budget_bytes), mg::memory::describe_levers(best).c_str(),
               static_cast<long long>(best.peak_reserved_bytes), best.step_seconds * 1e3);
  return {.levers = levers[plan.chosen],
          .predicted = {.budget_bytes = problem.budget_bytes,
                        .peak_reserved_bytes = best.peak_reserved_bytes,
                        .step_seconds = best.step_seconds}};
}

}  // namespace examples
