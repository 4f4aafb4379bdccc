// tests/optim/test_schedulers.cpp — StepLR, CosineAnnealingLR and OneCycleLR against
// hand-written transcriptions of PyTorch's formulas (every epoch, not just a few),
// WarmupCosineLR against values computed by hand, and their validation errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using Values = std::vector<double>;

namespace {

Tensor make_param(const Values& values) {
  Tensor param = from_vector(values, {static_cast<int64_t>(values.size())},
                             {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

// The lr after construction (epoch 0), then after each of `steps` steps.
Values lr_sequence(optim::Optimizer& optimizer, optim::LRScheduler& scheduler, int steps) {
  Values lrs = {optimizer.lr()};
  REQUIRE(scheduler.last_lr() == optimizer.lr());
  for (int i = 0; i < steps; ++i) {
    scheduler.step();
    REQUIRE(scheduler.last_lr() == optimizer.lr());
    lrs.push_back(optimizer.lr());
  }
  REQUIRE(scheduler.last_epoch() == steps);
  return lrs;
}

void require_close(const Values& actual, const Values& expected, double tolerance = 1e-12) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("epoch " << i);
    REQUIRE_THAT(actual[i], WithinAbs(expected[i], tolerance));
  }
}

// torch.optim.lr_scheduler.OneCycleLR.get_lr with anneal_strategy='cos', written out
// independently of the library's phase table.
double one_cycle_reference(int64_t step, double max_lr, int64_t total, double pct_start, double div,
                           double final_div, bool three_phase) {
  auto cos_anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  };
  double initial = max_lr / div;
  double min_lr = initial / final_div;
  double up_end = pct_start * total - 1;
  if (!three_phase) {
    if (step <= up_end) return cos_anneal(initial, max_lr, step / up_end);
    return cos_anneal(max_lr, min_lr, (step - up_end) / (total - 1 - up_end));
  }
  double down_end = 2 * pct_start * total - 2;
  if (step <= up_end) return cos_anneal(initial, max_lr, step / up_end);
  if (step <= down_end) return cos_anneal(max_lr, initial, (step - up_end) / (down_end - up_end));
  return cos_anneal(initial, min_lr, (step - down_end) / (total - 1 - down_end));
}

}  // namespace

TEST_CASE("StepLR decays by gamma every step_size epochs", "[scheduler]") {
  Tensor param = make_param({1.0});
  optim::SGD sgd({param}, {.lr = 1.0});
  optim::StepLR scheduler(sgd, /*step_size=*/3, /*gamma=*/0.1);
  require_close(lr_sequence(sgd, scheduler, 6), {1, 1, 1, 0.1, 0.1, 0.1, 0.01});
}

TEST_CASE("CosineAnnealingLR follows PyTorch's closed form", "[scheduler]") {
  Tensor param = make_param({1.0});
  optim::SGD sgd({param}, {.lr = 0.1});
  const double eta_min = 0.001;
  optim::CosineAnnealingLR scheduler(sgd, /*t_max=*/10, eta_min);
  Values expected;
  for (int epoch = 0; epoch <= 10; ++epoch) {
    expected.push_back(eta_min + (0.1 - eta_min) * (1 + std::cos(std::numbers::pi * epoch / 10)) / 2);
  }
  Values actual = lr_sequence(sgd, scheduler, 10);
  require_close(actual, expected);
  REQUIRE_THAT(actual.front(), WithinAbs(0.1, 1e-15));
  REQUIRE_THAT(actual.back(), WithinAbs(eta_min, 1e-15));
}

TEST_CASE("OneCycleLR: initial, peak and final lrs and every step between", "[scheduler]") {
  const double max_lr = 0.5, div = 25, final_div = 1e4;
  const int64_t total = 100;
  const double initial = max_lr / div;
  const double min_lr = initial / final_div;

  SECTION("two phases") {
    for (double pct_start : {0.25, 0.3}) {
      INFO("pct_start " << pct_start);
      Tensor param = make_param({1.0});
      optim::SGD sgd({param}, {.lr = 123.0});  // replaced by the schedule
      optim::OneCycleLR scheduler(sgd, max_lr, total, pct_start, div, final_div);
      Values actual = lr_sequence(sgd, scheduler, total - 1);
      Values expected;
      for (int64_t step = 0; step < total; ++step) {
        expected.push_back(one_cycle_reference(step, max_lr, total, pct_start, div, final_div, false));
      }
      require_close(actual, expected);
      REQUIRE_THAT(actual.front(), WithinRel(initial, 1e-12));
      REQUIRE_THAT(actual[static_cast<size_t>(pct_start * total) - 1], WithinRel(max_lr, 1e-12));
      REQUIRE_THAT(actual.back(), WithinRel(min_lr, 1e-9));
    }
  }
  SECTION("three phases") {
    Tensor param = make_param({1.0});
    optim::SGD sgd({param}, {.lr = 1.0});
    optim::OneCycleLR scheduler(sgd, max_lr, total, 0.25, div, final_div, /*three_phase=*/true);
    Values actual = lr_sequence(sgd, scheduler, total - 1);
    Values expected;
    for (int64_t step = 0; step < total; ++step) {
      expected.push_back(one_cycle_reference(step, max_lr, total, 0.25, div, final_div, true));
    }
    require_close(actual, expected);
    REQUIRE_THAT(actual[24], WithinRel(max_lr, 1e-12));
    REQUIRE_THAT(actual[48], WithinRel(initial, 1e-12));  // back down at 2 * 25 - 2
    REQUIRE_THAT(actual.back(), WithinRel(min_lr, 1e-9));
  }
}

TEST_CASE("OneCycleLR throws when stepped past total_steps, leaving the lr alone", "[scheduler]") {
  Tensor param = make_param({1.0});
  optim::SGD sgd({param}, {.lr = 1.0});
  optim::OneCycleLR scheduler(sgd, 0.1, /*total_steps=*/5);
  // Like PyTorch, epochs 0..total_steps are accepted (the constructor applies epoch 0).
  for (int i = 0; i < 5; ++i) scheduler.step();
  double lr = sgd.lr();
  REQUIRE_THROWS_WITH(scheduler.step(), Contains("tried to step 6 times") && Contains("total steps is 5"));
  REQUIRE(sgd.lr() == lr);
  REQUIRE(scheduler.last_epoch() == 5);
}

TEST_CASE("schedulers keep each parameter group's own base lr", "[scheduler]") {
  Tensor first = make_param({1.0});
  Tensor second = make_param({2.0});
  optim::SGD sgd({first}, {.lr = 1.0});
  sgd.add_param_group({second}, {.lr = 0.5});

  SECTION("StepLR") {
    optim::StepLR scheduler(sgd, 2, 0.5);
    for (int i = 0; i < 4; ++i) scheduler.step();  // epoch 4: two decays
    REQUIRE_THAT(sgd.param_groups()[0].lr, WithinAbs(0.25, 1e-15));
    REQUIRE_THAT(sgd.param_groups()[1].lr, WithinAbs(0.125, 1e-15));
    REQUIRE(scheduler.last_lrs() == Values{sgd.param_groups()[0].lr, sgd.param_groups()[1].lr});
  }
  SECTION("CosineAnnealingLR") {
    optim::CosineAnnealingLR scheduler(sgd, 4);
    for (int i = 0; i < 2; ++i) scheduler.step();  // halfway: half of each base lr
    REQUIRE_THAT(sgd.param_groups()[0].lr, WithinAbs(0.5, 1e-15));
    REQUIRE_THAT(sgd.param_groups()[1].lr, WithinAbs(0.25, 1e-15));
  }
  SECTION("OneCycleLR gives every group the same schedule") {
    optim::OneCycleLR scheduler(sgd, 1.0, 10);
    REQUIRE_THAT(sgd.param_groups()[0].lr, WithinRel(1.0 / 25, 1e-12));
    REQUIRE(sgd.param_groups()[1].lr == sgd.param_groups()[0].lr);
  }
}

TEST_CASE("schedulers refuse invalid settings with the value", "[scheduler]") {
  Tensor param = make_param({1.0});
  optim::SGD sgd({param}, {.lr = 1.0});
  REQUIRE_THROWS_WITH(optim::StepLR(sgd, 0), Contains("step_size must be > 0, got 0"));
  REQUIRE_THROWS_WITH(optim::CosineAnnealingLR(sgd, -1), Contains("t_max must be > 0, got -1"));
  REQUIRE_THROWS_WITH(optim::OneCycleLR(sgd, 0.1, 0), Contains("total_steps must be > 0, got 0"));
  REQUIRE_THROWS_WITH(optim::OneCycleLR(sgd, 0.1, 10, 0.0), Contains("pct_start must be in (0, 1)"));
  REQUIRE_THROWS_WITH(optim::OneCycleLR(sgd, 0.1, 10, 1.0), Contains("pct_start must be in (0, 1)"));
  REQUIRE(sgd.lr() == 1.0);  // a refused scheduler changes nothing
}

// ---- WarmupCosineLR: values computed by hand from the closed form ----

TEST_CASE("WarmupCosineLR rises linearly, follows half a cosine to the floor, then stays", "[scheduler]") {
  // Two groups (base lrs 1 and 0.5); warm-up 4 steps, cosine to 0.1 * base at step 12.
  Tensor first = make_param({1.0}), second = make_param({2.0});
  optim::AdamW adamw(std::vector<optim::ParamGroupOptions<optim::AdamWOptions>>{{{first}, {.lr = 1.0}},
                                                                                {{second}, {.lr = 0.5}}});
  optim::WarmupCosineLR scheduler(adamw, /*warmup_steps=*/4, /*total_steps=*/12, /*min_lr_factor=*/0.1);
  // Epochs 0..4: 0, 1/4, 2/4, 3/4, 1. Epoch 4 + k: 0.1 + 0.9 * (1 + cos(pi k / 8)) / 2, with
  // cos(pi/8) = 0.9238795325, cos(pi/4) = 0.7071067812, cos(3 pi/8) = 0.3826834324.
  const Values expected = {0.0,          0.25,         0.5,          0.75, 1.0,          0.9657457896, 0.8681980515,
                           0.7222075445, 0.55,         0.3777924555, 0.2318019485, 0.1342542104, 0.1,
                           0.1,          0.1};
  Values firsts = {scheduler.last_lrs()[0]}, seconds = {scheduler.last_lrs()[1]};
  for (size_t epoch = 1; epoch < expected.size(); ++epoch) {
    scheduler.step();
    firsts.push_back(adamw.param_groups()[0].lr);
    seconds.push_back(adamw.param_groups()[1].lr);
  }
  require_close(firsts, expected, 1e-10);
  Values halves;
  for (double lr : expected) halves.push_back(lr / 2);
  require_close(seconds, halves, 1e-10);
}

TEST_CASE("WarmupCosineLR: a start factor, no warm-up, and a floor of zero", "[scheduler]") {
  Tensor param = make_param({1.0});
  SECTION("warm-up from 0.2 of the base lr") {
    optim::SGD sgd({param}, {.lr = 2.0});
    optim::WarmupCosineLR scheduler(sgd, /*warmup_steps=*/2, /*total_steps=*/4, /*min_lr_factor=*/0.0,
                                    /*start_factor=*/0.2);
    // 2 * (0.2, 0.6, 1), then the cosine: 2 * (1 + cos(pi/2)) / 2 = 1, then 0 from step 4 on.
    require_close(lr_sequence(sgd, scheduler, 6), {0.4, 1.2, 2.0, 1.0, 0.0, 0.0, 0.0});
  }
  SECTION("without warm-up the first step takes the full lr") {
    optim::SGD sgd({param}, {.lr = 1.0});
    optim::WarmupCosineLR scheduler(sgd, /*warmup_steps=*/0, /*total_steps=*/3);
    // (1 + cos(pi k / 3)) / 2 for k = 0..3: 1, 3/4, 1/4, 0.
    require_close(lr_sequence(sgd, scheduler, 4), {1.0, 0.75, 0.25, 0.0, 0.0});
  }
}

TEST_CASE("WarmupCosineLR refuses invalid settings with the value", "[scheduler]") {
  Tensor param = make_param({1.0});
  optim::SGD sgd({param}, {.lr = 1.0});
  CHECK_THROWS_WITH(optim::WarmupCosineLR(sgd, -1, 10), Contains("warmup_steps must be >= 0, got -1"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(sgd, 10, 10), Contains("total_steps (10) must be greater than warmup_steps (10)"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(sgd, 1, 10, 1.5), Contains("min_lr_factor must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(sgd, 1, 10, 0.1, -0.5), Contains("start_factor must be in [0, 1], got -0.5"));
  CHECK(sgd.lr() == 1.0);  // a refused scheduler never touched the optimizer
}

TEST_CASE("from a CUDA graph's warm-up on, the learning rate also lives on the device and follows the schedule",
          "[scheduler][graph-capture]") {
  Tensor param = make_param({1.0, 2.0});
  optim::SGD optimizer({param}, {.lr = 0.1});
  optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);
  auto state_bytes = [] { return memory::snapshot(Device::cpu()).category(MemoryCategory::OptimizerState).current; };
  auto step_with_gradient = [&] {
    param.set_grad(from_vector(Values{1.0, -1.0}, {2}));
    optimizer.step();
  };
  // Outside a warm-up nothing is made: an eager optimizer pays nothing.
  const int64_t before = state_bytes();
  step_with_gradient();
  CHECK(state_bytes() == before);
  // A step that has not run in a warm-up cannot be captured: its rate would be baked in.
  {
    GraphCaptureScope capturing;
    param.set_grad(from_vector(Values{1.0, -1.0}, {2}));
    CHECK_THROWS_WITH(optimizer.step(), Contains("without having run in a warm-up first") && Contains("CapturedStep"));
  }
  {
    GraphWarmupScope warming_up;
    step_with_gradient();
  }
  CHECK(state_bytes() == before + 8);  // one float64 for the group on this device
  // The schedule reaches the rate on the device: the CPU update reads it there.
  const std::vector<double> at = param.to_vector<double>();
  scheduler.step();  // 0.1 -> 0.05
  step_with_gradient();
  const std::vector<double> after = param.to_vector<double>();
  CHECK_THAT(after[0], WithinAbs(at[0] - 0.05, 1e-15));
  CHECK_THAT(after[1], WithinAbs(at[1] + 0.05, 1e-15));
  // Inside a capture the rate cannot change: the fill would be replayed with the graph.
  {
    GraphCaptureScope capturing;
    CHECK_THROWS_WITH(optimizer.set_lr(1.0), Contains("changing the learning rate during CUDA graph capture"));
  }
  CHECK(optimizer.lr() == 0.05);  // refused before anything changed
}
