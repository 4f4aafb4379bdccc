// memory/budget_planner.h — the fastest way to train in a memory budget: given the plans a
// program could run (each a combination of memory levers: checkpointing, where the
// optimizer's state lives, micro-batching...) and a way to evaluate one (its peak reserved
// bytes predicted exactly on the simulated device, its step time by memory/step_cost.h), the
// planner evaluates every plan and picks the fastest whose peak fits.
//
//   std::vector<mg::memory::PlanCandidate> plans = ...;  // levers described as text
//   mg::memory::BudgetPlan plan = mg::memory::plan_for_budget(24LL << 30, plans, evaluate);
//   std::cout << mg::memory::explain(plan);              // every plan: peak, time, verdict
//   const mg::memory::PlanCandidate& best = mg::memory::chosen_plan(plan);  // or an mg::Error
//
// Nothing is run on a real device: a plan over budget costs a prediction, not an
// out-of-memory error. The planner knows nothing of models: the program maps its candidates'
// indices back to its own settings.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/memory_category.h"

namespace mg::memory {

struct PlanCandidate {
  // The levers, as (name, value) pairs: {"checkpoint", "whole"}, {"micro-batches", "2"}.
  std::vector<std::pair<std::string, std::string>> levers;
  // Filled by the evaluation:
  int64_t peak_reserved_bytes = 0;
  std::array<int64_t, kNumMemoryCategories> peak_bytes_by_category{};
  double step_seconds = 0;
  int64_t host_bytes = 0;  // pinned host memory the plan keeps (an offloaded optimizer's)
  // Filled by the planner: "chosen", or why not.
  std::string verdict;
};

struct BudgetPlan {
  int64_t budget_bytes = 0;
  std::vector<PlanCandidate> weighed;  // in the order given
  int chosen = -1;                     // index into weighed; -1 when nothing fits
};

// Evaluates each candidate (`evaluate` fills its peak, categories and time) and picks the
// fastest whose peak reserved bytes are at most `budget_bytes`; ties go to the smaller peak.
BudgetPlan plan_for_budget(int64_t budget_bytes, std::vector<PlanCandidate> candidates,
                           const std::function<void(PlanCandidate&)>& evaluate);

// One line per plan weighed: its levers, peak, predicted step time and verdict.
std::string explain(const BudgetPlan& plan);

// The chosen plan; when none fits, an mg::Error naming the budget, the smallest peak of any
// plan (the budget that would do), that plan's levers and the categories that fill it.
const PlanCandidate& chosen_plan(const BudgetPlan& plan);

// "checkpoint=whole, optimizer=8bit, micro-batches=2"
std::string describe_levers(const PlanCandidate& candidate);

}  // namespace mg::memory
