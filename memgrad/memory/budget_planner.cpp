// memory/budget_planner.cpp — evaluate every plan, keep the fastest that fits, say why
// each other one lost (see the header).
#include "memgrad/memory/budget_planner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "memgrad/core/error.h"

namespace mg::memory {

namespace {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

// "ACTIVATION 5.31 GiB, OPTIMIZER_STATE 0.93 GiB, ..." largest first, the three largest.
std::string largest_categories(const PlanCandidate& candidate) {
  std::vector<int> order(kNumMemoryCategories);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return candidate.peak_bytes_by_category[a] > candidate.peak_bytes_by_category[b];
  });
  std::string text;
  for (int i = 0; i < 3; ++i) {
    text += (i == 0 ? "" : ", ") + std::string(category_name(static_cast<MemoryCategory>(order[i]))) + " " +
            gib(candidate.peak_bytes_by_category[order[i]]);
  }
  return text;
}

}  // namespace

std::string describe_levers(const PlanCandidate& candidate) {
  std::string text;
  for (const auto& [name, value] : candidate.levers) text += (text.empty() ? "" : ", ") + name + "=" + value;
  return text;
}

BudgetPlan plan_for_budget(int64_t budget_bytes, std::vector<PlanCandidate> candidates,
                           const std::function<void(PlanCandidate&)>& evaluate) {
  MG_CHECK(budget_bytes > 0, "plan_for_budget: a budget of ", budget_bytes,
           " bytes; it must be positive. Hint: --memory-budget 24GiB");
  MG_CHECK(!candidates.empty(), "plan_for_budget: no plans to weigh");
  BudgetPlan plan{.budget_bytes = budget_bytes, .weighed = std::move(candidates)};
  for (PlanCandidate& candidate : plan.weighed) evaluate(candidate);
  for (int i = 0; i < static_cast<int>(plan.weighed.size()); ++i) {
    const PlanCandidate& candidate = plan.weighed[i];
    if (candidate.peak_reserved_bytes > budget_bytes) continue;
    if (plan.chosen < 0) {
      plan.chosen = i;
      continue;
    }
    const PlanCandidate& best = plan.weighed[plan.chosen];
    if (candidate.step_seconds < best.step_seconds ||
        (candidate.step_seconds == best.step_seconds && candidate.peak_reserved_bytes < best.peak_reserved_bytes)) {
      plan.chosen = i;
    }
  }
  for (int i = 0; i < static_cast<int>(plan.weighed.size()); ++i) {
    PlanCandidate& candidate = plan.weighed[i];
    if (i == plan.chosen) {
      candidate.verdict = "chosen";
    } else if (candidate.peak_reserved_bytes > budget_bytes) {
      candidate.verdict = "over the budget by " + std::to_string(candidate.peak_reserved_bytes - budget_bytes) + " bytes";
    } else {
      const double slower = candidate.step_seconds / plan.weighed[plan.chosen].step_seconds - 1.0;
      char text[64];
      std::snprintf(text, sizeof text, "fits, %.1f%% slower than the chosen", slower * 100.0);
      candidate.verdict = text;
    }
  }
  return plan;
}

std::string explain(const BudgetPlan& plan) {
  std::string text = "plans weighed for a budget of " + std::to_string(plan.budget_bytes) + " bytes (" +
                     gib(plan.budget_bytes) + "): predicted peak reserved bytes, predicted step, levers: verdict\n";
  for (const PlanCandidate& candidate : plan.weighed) {
    char line[96];
    std::snprintf(line, sizeof line, "%14lld B %10s %9s  ", static_cast<long long>(candidate.peak_reserved_bytes),
                  ("(" + gib(candidate.peak_reserved_bytes) + ")").c_str(),
                  milliseconds(candidate.step_seconds).c_str());
    text += (plan.weighed.data() + plan.chosen == &candidate ? "* " : "  ") + std::string(line) +
            describe_levers(candidate) + ": " + candidate.verdict + "\n";
  }
  return text;
}

const PlanCandidate& chosen_plan(const BudgetPlan& plan) {
  if (plan.chosen >= 0) return plan.weighed[plan.chosen];
  const PlanCandidate& smallest = *std::min_element(
      plan.weighed.begin(), plan.weighed.end(),
      [](const PlanCandidate& a, const PlanCandidate& b) { return a.peak_reserved_bytes < b.peak_reserved_bytes; });
  MG_CHECK(false, "no plan fits a budget of ", plan.budget_bytes, " bytes (", gib(plan.budget_bytes), "): the ",
           plan.weighed.size(), " plans weighed need at least ", smallest.peak_reserved_bytes, " bytes (",
           gib(smallest.peak_reserved_bytes), "), with ", describe_levers(smallest), ", filled by ",
           largest_categories(smallest), ". Hint: a budget of at least ", smallest.peak_reserved_bytes,
           " bytes, a smaller batch, or a smaller model.");
  return smallest;  // not reached
}

}  // namespace mg::memory
