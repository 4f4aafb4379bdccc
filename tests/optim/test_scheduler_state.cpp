// tests/optim/test_scheduler_state.cpp — LRScheduler::state_dict / load_state_dict: a
// scheduler loaded into a fresh one (over an optimizer of the same groups) stands where the
// saved one stood and continues with the same learning rates, for every kind; a state that
// does not fit is refused with the entry named and changes nothing.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

namespace {

Tensor make_param(double value) {
  Tensor param = from_vector(std::vector<double>{value}, {1}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

// An SGD of two groups (lrs 1 and 0.5).
std::unique_ptr<optim::SGD> two_group_sgd() {
  auto sgd = std::make_unique<optim::SGD>(std::vector<Tensor>{make_param(1.0)}, optim::SGDOptions{.lr = 1.0});
  sgd->add_param_group({make_param(2.0)}, {.lr = 0.5});
  return sgd;
}

using MakeScheduler = std::unique_ptr<optim::LRScheduler> (*)(optim::Optimizer&);

std::unique_ptr<optim::LRScheduler> step_lr(optim::Optimizer& optimizer) {
  return std::make_unique<optim::StepLR>(optimizer, 2, 0.5);
}
std::unique_ptr<optim::LRScheduler> cosine(optim::Optimizer& optimizer) {
  return std::make_unique<optim::CosineAnnealingLR>(optimizer, 10, 0.01);
}
std::unique_ptr<optim::LRScheduler> one_cycle(optim::Optimizer& optimizer) {
  return std::make_unique<optim::OneCycleLR>(optimizer, 1.0, 12);
}
std::unique_ptr<optim::LRScheduler> warmup_cosine(optim::Optimizer& optimizer) {
  return std::make_unique<optim::WarmupCosineLR>(optimizer, 3, 10, 0.1);
}

const Tensor& entry(const NamedTensors& state, const std::string& name) {
  for (const auto& [key, tensor] : state) {
    if (key == name) return tensor;
  }
  FAIL("no entry " << name);
  throw;
}

}  // namespace

TEST_CASE("an LR scheduler's state loads into a fresh one that continues exactly", "[scheduler]") {
  const auto [name, make] = GENERATE(table<const char*, MakeScheduler>({{"StepLR", step_lr},
                                                                        {"CosineAnnealingLR", cosine},
                                                                        {"OneCycleLR", one_cycle},
                                                                        {"WarmupCosineLR", warmup_cosine}}));
  INFO(name);
  auto saved_optimizer = two_group_sgd();
  auto saved = make(*saved_optimizer);
  for (int i = 0; i < 5; ++i) saved->step();
  const NamedTensors state = saved->state_dict();
  REQUIRE(state.size() == 3);
  CHECK(entry(state, "last_epoch").dtype() == DType::Int64);
  CHECK(entry(state, "last_epoch").item<int64_t>() == 5);
  CHECK(entry(state, "base_lrs").to_vector<double>() == std::vector<double>{1.0, 0.5});
  CHECK(entry(state, "last_lrs").to_vector<double>() == saved->last_lrs());

  auto optimizer = two_group_sgd();
  auto loaded = make(*optimizer);
  loaded->load_state_dict(state);
  CHECK(loaded->last_epoch() == 5);
  CHECK(loaded->last_lrs() == saved->last_lrs());
  for (int i = 0; i < 4; ++i) {
    saved->step();
    loaded->step();
    INFO("step " << i);
    CHECK(loaded->last_lrs() == saved->last_lrs());
    CHECK(optimizer->param_groups()[1].lr == saved_optimizer->param_groups()[1].lr);
  }
}

TEST_CASE("an LR scheduler refuses a state that does not fit and keeps its own", "[scheduler]") {
  auto saved_optimizer = two_group_sgd();
  optim::StepLR saved(*saved_optimizer, 2);
  saved.step();
  const NamedTensors state = saved.state_dict();

  Tensor param = make_param(1.0);
  optim::SGD one_group({param}, {.lr = 1.0});
  optim::StepLR target(one_group, 2);
  target.step();
  target.step();

  auto with = [&](const std::string& name, const Tensor& value) {
    NamedTensors changed;
    for (const auto& [key, tensor] : state) changed.emplace_back(key, key == name ? value : tensor);
    if (name == "extra") changed.emplace_back(name, value);
    return changed;
  };
  SECTION("of another number of groups") {
    CHECK_THROWS_WITH(target.load_state_dict(state, "scheduler file 'a.safetensors'"),
                      Contains("scheduler file 'a.safetensors': \"base_lrs\" is [2] float64 but this scheduler needs [1] "
                               "float64 (one lr per parameter group)"));
  }
  SECTION("with an entry it does not know") {
    CHECK_THROWS_WITH(target.load_state_dict(with("extra", zeros({}))), Contains("unexpected entry \"extra\""));
  }
  SECTION("with a missing entry") {
    NamedTensors partial(state.begin(), state.begin() + 1);
    CHECK_THROWS_WITH(target.load_state_dict(partial), Contains("is missing"));
  }
  SECTION("with a last_epoch of another dtype") {
    optim::StepLR two_groups(*saved_optimizer, 2);
    CHECK_THROWS_WITH(two_groups.load_state_dict(with("last_epoch", zeros({}, {.dtype = DType::Float64}))),
                      Contains("\"last_epoch\" is [] float64 but this scheduler needs [] int64"));
  }
  CHECK(target.last_epoch() == 2);
  CHECK(target.last_lrs() == std::vector<double>{0.1});
}
