// tests/memory/test_budget_planner.cpp — memory/budget_planner.h on made-up plans: the
// fastest plan that fits is chosen (the smaller peak on a tie), every other gets its
// reason, and a budget nothing fits is refused naming the smallest plan and what fills it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/memory/budget_planner.h"

using namespace mg;

namespace {

// Plans named by one lever, with the peak and step time each evaluates to.
struct Made {
  std::string name;
  int64_t peak;
  double seconds;
};

memory::BudgetPlan plan(int64_t budget, const std::vector<Made>& made) {
  std::vector<memory::PlanCandidate> candidates;
  for (const Made& m : made) {
    memory::PlanCandidate candidate;
    candidate.levers = {{"plan", m.name}};
    candidates.push_back(candidate);
  }
  size_t next = 0;
  return memory::plan_for_budget(budget, candidates, [&](memory::PlanCandidate& candidate) {
    const Made& m = made[next++];
    candidate.peak_reserved_bytes = m.peak;
    candidate.step_seconds = m.seconds;
    candidate.peak_bytes_by_category[static_cast<int>(MemoryCategory::Activation)] = m.peak / 2;
    candidate.peak_bytes_by_category[static_cast<int>(MemoryCategory::Parameter)] = m.peak / 4;
  });
}

const std::vector<Made> kPlans = {{"fast", 1000, 1.0}, {"middle", 600, 1.5}, {"tie", 500, 1.5}, {"small", 300, 3.0}};

}  // namespace

TEST_CASE("the planner picks the fastest plan that fits, the smaller peak on a tie", "[memory][planner]") {
  CHECK(memory::chosen_plan(plan(2000, kPlans)).levers[0].second == "fast");
  const memory::BudgetPlan middle = plan(800, kPlans);
  CHECK(memory::chosen_plan(middle).levers[0].second == "tie");
  CHECK(middle.weighed[0].verdict == "over the budget by 200 bytes");
  CHECK(middle.weighed[1].verdict == "fits, 0.0% slower than the chosen");
  CHECK(middle.weighed[3].verdict == "fits, 100.0% slower than the chosen");
  CHECK(memory::chosen_plan(plan(300, kPlans)).levers[0].second == "small");
  const std::string explained = memory::explain(middle);
  CHECK_THAT(explained, Catch::Contains("*            500 B") && Catch::Contains("plan=tie: chosen"));
}

TEST_CASE("the planner refuses a budget nothing fits, naming the smallest plan and what fills it",
          "[memory][planner]") {
  const memory::BudgetPlan none = plan(299, kPlans);
  CHECK(none.chosen == -1);
  CHECK_THROWS_WITH(memory::chosen_plan(none),
                    Catch::Contains("no plan fits a budget of 299 bytes") && Catch::Contains("need at least 300 bytes") &&
                        Catch::Contains("plan=small") && Catch::Contains("ACTIVATION") &&
                        Catch::Contains("Hint: a budget of at least 300 bytes"));
  CHECK_THROWS_AS(plan(0, kPlans), Error);
}
