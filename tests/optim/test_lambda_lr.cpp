// tests/optim/test_lambda_lr.cpp — LambdaLR: lr = base_lr * lambda(epoch) at construction
// (epoch 0) and after every step, with one lambda for all groups or one per group, as
// torch.optim.lr_scheduler.LambdaLR; a lambda that fails leaves the next step's groups in
// order; invalid settings are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/optim/lambda_lr.h"
#include "memgrad/optim/sgd.h"

using namespace mg;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {

Tensor make_param(double value) {
  Tensor param = from_vector(std::vector<double>{value}, {1}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

}  // namespace

TEST_CASE("LambdaLR: one lambda scales every group's base lr, epoch 0 applied at construction", "[scheduler][lambda_lr]") {
  Tensor first = make_param(1.0), second = make_param(2.0);
  optim::SGD sgd({first}, {.lr = 0.1});
  sgd.add_param_group({second}, {.lr = 0.4});
  optim::LambdaLR scheduler(sgd, [](int64_t epoch) { return std::pow(0.95, static_cast<double>(epoch)); });
  for (int64_t epoch = 0; epoch <= 6; ++epoch) {
    if (epoch > 0) scheduler.step();
    INFO("epoch " << epoch);
    REQUIRE(scheduler.last_epoch() == epoch);
    REQUIRE_THAT(sgd.param_groups()[0].lr, WithinRel(0.1 * std::pow(0.95, epoch), 1e-15));
    REQUIRE_THAT(sgd.param_groups()[1].lr, WithinRel(0.4 * std::pow(0.95, epoch), 1e-15));
    REQUIRE(scheduler.last_lrs() == std::vector<double>{sgd.param_groups()[0].lr, sgd.param_groups()[1].lr});
  }
}

TEST_CASE("LambdaLR: one lambda per group, in group order", "[scheduler][lambda_lr]") {
  Tensor first = make_param(1.0), second = make_param(2.0);
  optim::SGD sgd({first}, {.lr = 1.0});
  sgd.add_param_group({second}, {.lr = 0.5});
  // A linear warm-up over 4 epochs for the first group, a doubling for the second.
  optim::LambdaLR scheduler(sgd, {[](int64_t epoch) { return std::min(1.0, (epoch + 1) / 4.0); },
                                  [](int64_t epoch) { return std::pow(2.0, static_cast<double>(epoch)); }});
  const std::vector<double> first_lrs = {0.25, 0.5, 0.75, 1.0, 1.0};
  const std::vector<double> second_lrs = {0.5, 1.0, 2.0, 4.0, 8.0};
  for (size_t epoch = 0; epoch < first_lrs.size(); ++epoch) {
    if (epoch > 0) scheduler.step();
    INFO("epoch " << epoch);
    REQUIRE(sgd.param_groups()[0].lr == first_lrs[epoch]);
    REQUIRE(sgd.param_groups()[1].lr == second_lrs[epoch]);
  }
}

TEST_CASE("LambdaLR: a lambda that fails changes nothing, and the retried step keeps the groups apart",
          "[scheduler][lambda_lr]") {
  Tensor first = make_param(1.0), second = make_param(2.0);
  optim::SGD sgd({first}, {.lr = 1.0});
  sgd.add_param_group({second}, {.lr = 0.5});
  bool fail_once = true;
  optim::LambdaLR scheduler(sgd, {[](int64_t epoch) { return 1.0 + static_cast<double>(epoch); },
                                  [&fail_once](int64_t epoch) {
                                    if (epoch == 1 && fail_once) {
                                      fail_once = false;
                                      return std::numeric_limits<double>::quiet_NaN();
                                    }
                                    return 10.0;
                                  }});
  REQUIRE_THROWS_WITH(scheduler.step(), Contains("lambda of parameter group 1 returned nan at epoch 1"));
  REQUIRE(scheduler.last_epoch() == 0);
  REQUIRE(sgd.param_groups()[0].lr == 1.0);
  REQUIRE(sgd.param_groups()[1].lr == 5.0);
  scheduler.step();
  REQUIRE(sgd.param_groups()[0].lr == 2.0);  // group 0's lambda, not group 1's
  REQUIRE(sgd.param_groups()[1].lr == 5.0);
}

TEST_CASE("LambdaLR refuses a lambda count that is not one or one per group, and empty lambdas",
          "[scheduler][lambda_lr]") {
  Tensor param = make_param(1.0);
  optim::SGD sgd({param}, {.lr = 1.0});
  auto constant = [](int64_t) { return 1.0; };
  REQUIRE_THROWS_WITH(optim::LambdaLR(sgd, std::vector<optim::LambdaLR::Lambda>{constant, constant}),
                      Contains("expected one lambda or one per parameter group (1), got 2"));
  REQUIRE_THROWS_WITH(optim::LambdaLR(sgd, optim::LambdaLR::Lambda()), Contains("lambda 0 is empty"));
  REQUIRE_THROWS_WITH(optim::LambdaLR(sgd, [](int64_t) { return -1.0; }), Contains("must be finite and >= 0"));
}
