// optim/scheduler.h — learning-rate schedulers (StepLR, CosineAnnealingLR, OneCycleLR,
// WarmupCosineLR) with
// PyTorch's semantics: constructing one applies epoch 0's learning rate, and each step()
// moves to the next epoch and sets every parameter group's lr.
//
// Each scheduler is a closed form lr_at(epoch, base_lr) of the epoch and the group's lr
// at construction (its base lr), so a schedule never drifts from repeated multiplication.
// They only write doubles into the optimizer's groups: no tensors, no device work.
//
// A scheduler's state (state_dict) is where it stands: last_epoch, the base lrs and the
// last lrs, as PyTorch's scheduler.state_dict() holds them; a checkpoint saves it beside
// the optimizer's (training/checkpoint.h), so that a resumed run continues the schedule
// exactly instead of replaying step() once per step done.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/optim/optimizer.h"

namespace mg::optim {

class LRScheduler {
 public:
  // Records each group's current lr as its base lr. Concrete schedulers apply epoch 0
  // at the end of their own constructor (lr_at is not callable from this one).
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Moves to the next epoch and sets every group's lr to lr_at(epoch, its base lr).
  // Call it after optimizer.step(), as in PyTorch.
  void step();
  // The lr last set in the first group, and in every group.
  double last_lr() const { return last_lrs_.front(); }
  const std::vector<double>& last_lrs() const { return last_lrs_; }
  // The epoch last applied: 0 right after construction.
  int64_t last_epoch() const { return last_epoch_; }

  // "last_epoch" (0-d int64), "base_lrs" and "last_lrs" (1-d float64, one per group):
  // everything that moves as the schedule runs. The closed forms' own settings (step_size,
  // t_max, ...) belong to the constructor and are not saved, as an optimizer's
  // hyper-parameters other than lr are checked rather than restored.
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Restores what state_dict() saved, after checking every entry (name, dtype, shape, one
  // lr per group of this scheduler's optimizer): a state that does not fit changes nothing.
  // The optimizer's lrs are not written (as in PyTorch: they come back with the
  // optimizer's own state dict). `source` names where the state came from in errors.
  // NOTE: a scheduler with more state overrides both: its state_dict() appends its entries
  // to LRScheduler::state_dict()'s, its load_state_dict() checks and removes its own
  // entries, hands the rest to LRScheduler::load_state_dict (which refuses names it does
  // not know), then applies its own.
  virtual void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state,
                               const std::string& source = "the LR scheduler state dict");

 protected:
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;  // one per group, as at construction
  std::vector<double> last_lrs_;
  int64_t last_epoch_ = -1;
};

// lr = base_lr * gamma^(epoch / step_size): decays by gamma every step_size epochs.
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2: half a cosine
// from base_lr down to eta_min over t_max epochs (PyTorch's closed form, which keeps
// following the cosine back up after t_max).
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// The 1cycle policy with cosine annealing (PyTorch's anneal_strategy='cos'): from
// max_lr / div_factor up to max_lr over the first pct_start of total_steps, then down to
// initial_lr / final_div_factor at step total_steps - 1. With three_phase, it goes back
// to the initial lr symmetrically before annealing to the minimum. Every group follows
// the same schedule (the groups' own lrs are replaced, as PyTorch does).
// NOTE: like PyTorch, epoch total_steps is still accepted; step() beyond it throws.
class OneCycleLR final : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25, double final_div_factor = 1e4, bool three_phase = false);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  struct Phase {
    double end_step;
    double start_lr;
    double end_lr;
  };
  std::vector<Phase> phases_;
  int64_t total_steps_;
};

// Linear warm-up, then half a cosine down to a floor: the schedule GPT-2-style training uses
// (nanoGPT's get_lr, Hugging Face's get_cosine_schedule_with_warmup and its min-lr variant).
// For each group, with base the group's base lr, W = warmup_steps and N = total_steps:
//   epoch < W:       base * (start_factor + (1 - start_factor) * epoch / W)
//   W <= epoch <= N: min + (base - min) * (1 + cos(pi * (epoch - W) / (N - W))) / 2
//   epoch > N:       min
// where min = min_lr_factor * base (nanoGPT's min_lr = learning_rate / 10 is 0.1). So the lr
// starts at start_factor * base (0 by default: the first step changes nothing, as
// Hugging Face's), reaches base at epoch W, min at N, and stays there.
class WarmupCosineLR final : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr_factor = 0.0,
                 double start_factor = 0.0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_steps_;
  int64_t total_steps_;
  double min_lr_factor_;
  double start_factor_;
};

}  // namespace mg::optim
