// optim/lambda_lr.h — LambdaLR: lr = base_lr * lambda(epoch), with a lambda the user
// writes (PyTorch's torch.optim.lr_scheduler.LambdaLR): a warm-up, an inverse square root,
// any schedule the built-in ones lack.
//
//   mg::optim::LambdaLR warmup(optimizer, [](int64_t epoch) { return std::min(1.0, (epoch + 1) / 100.0); });
//
// One lambda for every parameter group, or one per group (in group order). As every
// LRScheduler, constructing it applies epoch 0, and step() moves to the next epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "memgrad/optim/scheduler.h"
#include "memgrad/optim/scheduler_group_cursor.h"

namespace mg::optim {

class LambdaLR final : public LRScheduler {
 public:
  // The factor the base lr is multiplied by at `epoch` (0, 1, ...); finite and >= 0.
  using Lambda = std::function<double(int64_t epoch)>;

  LambdaLR(Optimizer& optimizer, Lambda lambda);
  // lambdas[g] for group g: one per parameter group of the optimizer.
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lambdas);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<Lambda> lambdas_;  // one, or one per group
  mutable SchedulerGroupCursor cursor_;
};

}  // namespace mg::optim
