// optim/reduce_lr_on_plateau.h — ReduceLROnPlateau: lower the learning rate when a metric
// stops improving (PyTorch's torch.optim.lr_scheduler.ReduceLROnPlateau):
//
//   mg::optim::ReduceLROnPlateau plateau(optimizer, {.factor = 0.5, .patience = 2});
//   for (...epochs...) { train(); plateau.step(validation_loss); }
//
// Unlike the closed-form schedulers it depends on the metrics seen, so it keeps state: the
// best metric, how many epochs in a row were not better (num_bad_epochs), and a cooldown
// counter. step(metric) follows torch's step():
//   better = metric < best * (1 - threshold)  (mode Min, threshold_mode Rel),
//            metric < best - threshold        (Min, Abs),
//            metric > best * (1 + threshold)  (Max, Rel), metric > best + threshold (Max, Abs)
//   better: best = metric, num_bad_epochs = 0; else num_bad_epochs += 1
//   in cooldown (counter > 0): counter -= 1, num_bad_epochs = 0
//   num_bad_epochs > patience: every group's lr becomes max(lr * factor, min_lr of the
//     group), unless that changes it by eps or less; counter = cooldown, num_bad_epochs = 0
// The reduction starts from each group's lr as it is at that step (as torch's).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/optim/scheduler.h"
#include "memgrad/optim/scheduler_group_cursor.h"

namespace mg::optim {

// Min: a lower metric is better (a loss); Max: a higher one (an accuracy).
enum class PlateauMode { Min, Max };
// Rel: better by a fraction `threshold` of the best; Abs: by `threshold` itself.
enum class ThresholdMode { Rel, Abs };

struct ReduceLROnPlateauOptions {
  PlateauMode mode = PlateauMode::Min;
  double factor = 0.1;    // new lr = lr * factor, in [0, 1)
  int64_t patience = 10;  // epochs without improvement tolerated before reducing
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;         // epochs after a reduction during which bad epochs are not counted
  std::vector<double> min_lrs;  // lower bound of each group's lr: none (0), one for all, or one per group
  double eps = 1e-8;            // a reduction smaller than this is not applied
};

class ReduceLROnPlateau final : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});

  // Moves to the next epoch with this epoch's metric, reducing the lrs when it has not
  // improved for more than `patience` epochs (see the top of the file). NOTE: LRScheduler's
  // step() without a metric, reached through a base reference, moves to the next epoch and
  // changes no lr.
  void step(double metric);

  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

  // Its own state: "best" (0-d float64; +inf or -inf before the first step), "num_bad_epochs"
  // and "cooldown_counter" (0-d int64), "lrs" (1-d float64: each group's lr now).
  // load_state_dict checks every entry first (a state that does not fit changes nothing),
  // then restores them and sets each group's lr; `source` names the state in errors.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state,
                       const std::string& source = "the ReduceLROnPlateau state dict");

 protected:
  // The group's lr, reduced when step(metric) decided so.
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  bool is_better(double metric) const;

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;  // one per group
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  bool reducing_ = false;  // true only while step(metric) applies a reduction
  mutable SchedulerGroupCursor cursor_;
};

}  // namespace mg::optim
