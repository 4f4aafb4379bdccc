// tests/optim/test_reduce_lr_on_plateau.cpp — ReduceLROnPlateau against sequences worked out
// by hand from torch.optim.lr_scheduler.ReduceLROnPlateau's step() (each case says why each
// lr is what it is): patience, relative and absolute thresholds, mode max with cooldown,
// per-group min_lrs and eps; its state_dict resuming a run exactly; invalid settings refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/optim/reduce_lr_on_plateau.h"
#include "memgrad/optim/sgd.h"

using namespace mg;
using Catch::Matchers::Contains;
using Values = std::vector<double>;

namespace {

Tensor make_param(double value) {
  Tensor param = from_vector(std::vector<double>{value}, {1}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

// The first group's lr after stepping with each metric in turn.
Values lrs_after(optim::Optimizer& optimizer, optim::ReduceLROnPlateau& plateau, const Values& metrics) {
  Values lrs;
  for (double metric : metrics) {
    plateau.step(metric);
    REQUIRE(plateau.last_lr() == optimizer.lr());
    lrs.push_back(optimizer.lr());
  }
  REQUIRE(plateau.last_epoch() == static_cast<int64_t>(metrics.size()));
  return lrs;
}

}  // namespace

TEST_CASE("ReduceLROnPlateau: factor 0.5 after more than `patience` epochs without improvement",
          "[scheduler][plateau]") {
  Tensor param = make_param(1.0);
  optim::SGD sgd({param}, {.lr = 1.0});
  optim::ReduceLROnPlateau plateau(sgd, {.factor = 0.5, .patience = 2, .threshold = 0});
  REQUIRE(plateau.last_epoch() == 0);
  REQUIRE(plateau.best() == std::numeric_limits<double>::infinity());
  // 10, 9: better (bad 0). 9, 9: bad 1, 2 (not > 2). 9: bad 3 > 2: lr 0.5, bad 0.
  // 8: better. 8, 8: bad 1, 2. 8: bad 3: lr 0.25. 8: bad 1.
  CHECK(lrs_after(sgd, plateau, {10, 9, 9, 9, 9, 8, 8, 8, 8, 8}) ==
        Values{1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25});
  CHECK(plateau.best() == 8);
  CHECK(plateau.num_bad_epochs() == 1);
}

TEST_CASE("ReduceLROnPlateau: relative and absolute thresholds", "[scheduler][plateau]") {
  const Values metrics = {100, 95, 89, 85, 80, 79, 78};
  Tensor param = make_param(1.0);
  optim::SGD sgd({param}, {.lr = 1.0});
  SECTION("rel: better means below best * (1 - 0.1)") {
    optim::ReduceLROnPlateau plateau(sgd, {.factor = 0.1, .patience = 1, .threshold = 0.1});
    // 100: best. 95 >= 90: bad 1. 89 < 90: best 89. 85 >= 80.1: bad 1. 80 < 80.1: best 80.
    // 79 >= 72: bad 1. 78: bad 2 > 1: lr 0.1.
    Values lrs = lrs_after(sgd, plateau, metrics);
    CHECK(lrs == Values{1, 1, 1, 1, 1, 1, 0.1});
  }
  SECTION("abs: better means below best - 10") {
    optim::ReduceLROnPlateau plateau(
        sgd, {.factor = 0.1, .patience = 1, .threshold = 10, .threshold_mode = optim::ThresholdMode::Abs});
    // 100: best. 95 >= 90: bad 1. 89 < 90: best 89. 85 >= 79: bad 1. 80 >= 79: bad 2: lr 0.1.
    // 79 >= 79: bad 1. 78 < 79: best 78.
    Values lrs = lrs_after(sgd, plateau, metrics);
    CHECK(lrs.size() == 7);
    for (size_t i = 0; i < 4; ++i) CHECK(lrs[i] == 1);
    for (size_t i = 4; i < 7; ++i) CHECK(lrs[i] == Approx(0.1).epsilon(1e-15));
    CHECK(plateau.best() == 78);
  }
}

TEST_CASE("ReduceLROnPlateau: mode max, and bad epochs in cooldown do not count", "[scheduler][plateau]") {
  Tensor param = make_param(1.0);
  optim::SGD sgd({param}, {.lr = 1.0});
  optim::ReduceLROnPlateau plateau(sgd, {.mode = optim::PlateauMode::Max,
                                         .factor = 0.5,
                                         .patience = 0,
                                         .threshold = 0,
                                         .threshold_mode = optim::ThresholdMode::Abs,
                                         .cooldown = 2});
  // 1: best (from -inf). 1: bad 1 > 0: lr 0.5, cooldown 2. 1: cooldown 2 -> 1, bad 0.
  // 1: cooldown 1 -> 0, bad 0. 1: bad 1: lr 0.25, cooldown 2. 2: better; cooldown -> 1.
  // 2: not better; cooldown -> 0, bad 0.
  CHECK(lrs_after(sgd, plateau, {1, 1, 1, 1, 1, 2, 2}) == Values{1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25});
  CHECK(plateau.best() == 2);
  CHECK(plateau.cooldown_counter() == 0);
}

TEST_CASE("ReduceLROnPlateau: per-group min_lrs, and reductions of eps or less are skipped", "[scheduler][plateau]") {
  Tensor first = make_param(1.0), second = make_param(2.0);
  optim::SGD sgd({first}, {.lr = 1.0});
  sgd.add_param_group({second}, {.lr = 0.01});
  optim::ReduceLROnPlateau plateau(sgd, {.factor = 0.1, .patience = 0, .min_lrs = {0.05, 0.001}});
  // Reductions from the second step on: 1 -> 0.1 -> max(0.01, 0.05) = 0.05 -> 0.05;
  // 0.01 -> 0.001 -> max(0.0001, 0.001) = 0.001 (unchanged).
  const std::vector<Values> expected = {{1, 0.01}, {0.1, 0.001}, {0.05, 0.001}, {0.05, 0.001}};
  for (const Values& lrs : expected) {
    plateau.step(5.0);
    CHECK(sgd.param_groups()[0].lr == Approx(lrs[0]).epsilon(1e-15));
    CHECK(sgd.param_groups()[1].lr == Approx(lrs[1]).epsilon(1e-15));
  }

  Tensor tiny = make_param(3.0);
  optim::SGD small({tiny}, {.lr = 1e-7});
  optim::ReduceLROnPlateau halving(small, {.factor = 0.5, .patience = 0});  // eps 1e-8
  // 1e-7 -> 5e-8 -> 2.5e-8 -> 1.25e-8; halving that would change it by 6.25e-9 <= eps: kept.
  Values lrs = lrs_after(small, halving, {1, 1, 1, 1, 1, 1});
  const Values expected_tiny = {1e-7, 5e-8, 2.5e-8, 1.25e-8, 1.25e-8, 1.25e-8};
  for (size_t i = 0; i < lrs.size(); ++i) CHECK(lrs[i] == Approx(expected_tiny[i]).epsilon(1e-12));
}

TEST_CASE("ReduceLROnPlateau's state_dict resumes a run exactly", "[scheduler][plateau]") {
  const Values metrics = {10, 9, 9, 9, 9, 8, 8, 8, 8, 8};
  const optim::ReduceLROnPlateauOptions options{.factor = 0.5, .patience = 2, .threshold = 0, .cooldown = 1};
  Tensor param = make_param(1.0);
  optim::SGD whole_sgd({param}, {.lr = 1.0});
  optim::ReduceLROnPlateau whole(whole_sgd, options);
  const Values uninterrupted = lrs_after(whole_sgd, whole, metrics);

  optim::SGD first_sgd({param}, {.lr = 1.0});
  optim::ReduceLROnPlateau first(first_sgd, options);
  Values resumed = lrs_after(first_sgd, first, Values(metrics.begin(), metrics.begin() + 5));
  const auto state = first.state_dict();
  REQUIRE(state.size() == 4);
  CHECK(state[0].first == "best");
  CHECK(state[0].second.dtype() == DType::Float64);
  CHECK(state[1].second.dtype() == DType::Int64);
  CHECK(state[3].second.sizes() == Shape{1});

  optim::SGD second_sgd({param}, {.lr = 1.0});  // a fresh process: the lr as configured
  optim::ReduceLROnPlateau second(second_sgd, options);
  second.load_state_dict(state, "checkpoint.safetensors");
  CHECK(second_sgd.lr() == first_sgd.lr());
  CHECK(second.best() == first.best());
  CHECK(second.cooldown_counter() == first.cooldown_counter());
  for (size_t i = 5; i < metrics.size(); ++i) {
    second.step(metrics[i]);
    resumed.push_back(second_sgd.lr());
  }
  CHECK(resumed == uninterrupted);

  auto missing = state;
  missing.pop_back();
  CHECK_THROWS_WITH(second.load_state_dict(missing, "run.safetensors"),
                    Contains("run.safetensors: \"lrs\" is missing"));
  auto extra = state;
  extra.emplace_back("last_epoch", full({}, 3.0, {.dtype = DType::Int64}));
  CHECK_THROWS_WITH(second.load_state_dict(extra), Contains("unexpected entry \"last_epoch\""));
  auto wrong = state;
  wrong[3].second = full({2}, 0.1, {.dtype = DType::Float64});
  CHECK_THROWS_WITH(second.load_state_dict(wrong), Contains("\"lrs\" is [2] float64 but ReduceLROnPlateau needs [1]"));
}

TEST_CASE("ReduceLROnPlateau refuses invalid settings with the value", "[scheduler][plateau]") {
  Tensor param = make_param(1.0);
  optim::SGD sgd({param}, {.lr = 1.0});
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(sgd, {.factor = 1.0}), Contains("factor must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(sgd, {.patience = -1}), Contains("patience must be >= 0, got -1"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(sgd, {.cooldown = -2}), Contains("cooldown must be >= 0, got -2"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(sgd, {.min_lrs = {0.1, 0.2}}),
                    Contains("one per parameter group (1), got 2"));
}
