// optim/scheduler.cpp — the schedulers' closed forms, transcribed from torch.optim.lr_scheduler
// (StepLR._get_closed_form_lr, CosineAnnealingLR._get_closed_form_lr, OneCycleLR.get_lr), and
// the warm-up cosine of GPT-2-style training.
#include "memgrad/optim/scheduler.h"

#include <cmath>
#include <map>
#include <numbers>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  MG_CHECK(!optimizer.param_groups().empty(), "LRScheduler: the optimizer has no parameter groups");
  for (const ParamGroup& group : optimizer.param_groups()) base_lrs_.push_back(group.lr);
  last_lrs_ = base_lrs_;
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::step() {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  MG_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer has ", groups.size(),
           " parameter groups but had ", base_lrs_.size(), " when the scheduler was made. Hint: add ",
           "every group before creating the scheduler.");
  int64_t epoch = last_epoch_ + 1;
  // NOTE: all lrs are computed before any is written, so a step that throws (OneCycleLR
  // past its end) leaves the optimizer and the epoch as they were.
  std::vector<double> lrs;
  lrs.reserve(groups.size());
  for (double base_lr : base_lrs_) lrs.push_back(lr_at(epoch, base_lr));
  for (size_t g = 0; g < groups.size(); ++g) optimizer_.set_group_lr(g, lrs[g]);
  last_lrs_ = std::move(lrs);
  last_epoch_ = epoch;
}

std::vector<std::pair<std::string, Tensor>> LRScheduler::state_dict() const {
  const auto groups = static_cast<int64_t>(base_lrs_.size());
  // NOTE: through from_vector, not scalar_tensor's double, so that every int64 survives.
  return {{"last_epoch", from_vector(std::vector<int64_t>{last_epoch_}, {1}).view({})},
          {"base_lrs", from_vector(base_lrs_, {groups})},
          {"last_lrs", from_vector(last_lrs_, {groups})}};
}

void LRScheduler::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state,
                                  const std::string& source) {
  std::map<std::string, Tensor> entries;
  for (const auto& [key, tensor] : state) {
    MG_CHECK(key == "last_epoch" || key == "base_lrs" || key == "last_lrs", source, ": unexpected entry \"", key,
             "\"; an LR scheduler's state holds last_epoch, base_lrs and last_lrs. Hint: load a scheduler's ",
             "state into a scheduler of the same kind.");
    MG_CHECK(tensor.defined(), source, ": the entry \"", key, "\" is an undefined tensor.");
    entries[key] = tensor;
  }
  const auto groups = static_cast<int64_t>(base_lrs_.size());
  auto take = [&](const std::string& key, DType dtype, const Shape& shape) {
    auto found = entries.find(key);
    MG_CHECK(found != entries.end(), source, ": \"", key, "\" is missing. Hint: the state was not written by ",
             "LRScheduler::state_dict().");
    const Tensor& tensor = found->second;
    MG_CHECK(tensor.dtype() == dtype && tensor.sizes() == shape, source, ": \"", key, "\" is ", tensor.sizes(),
             " ", tensor.dtype(), " but this scheduler needs ", shape, " ", dtype,
             key == "last_epoch" ? "." : " (one lr per parameter group). Hint: the optimizer must have the groups "
                                         "it had when the state was saved.");
    return tensor.to(Device::cpu());
  };
  const int64_t last_epoch = take("last_epoch", DType::Int64, {}).item<int64_t>();
  std::vector<double> base_lrs = take("base_lrs", DType::Float64, {groups}).to_vector<double>();
  std::vector<double> last_lrs = take("last_lrs", DType::Float64, {groups}).to_vector<double>();
  MG_CHECK(last_epoch >= 0, source, ": last_epoch is ", last_epoch,
           "; a scheduler applies epoch 0 when it is made, so a saved one is at 0 or later.");
  for (const std::vector<double>* lrs : {&base_lrs, &last_lrs}) {
    for (double lr : *lrs) {
      MG_CHECK(std::isfinite(lr) && lr >= 0, source, ": a saved learning rate is ", lr,
               "; learning rates are finite and >= 0.");
    }
  }
  last_epoch_ = last_epoch;
  base_lrs_ = std::move(base_lrs);
  last_lrs_ = std::move(last_lrs);
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  MG_CHECK(step_size > 0, "StepLR: step_size must be > 0, got ", step_size,
           ". Hint: it is the number of epochs between decays.");
  step();  // epoch 0
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  MG_CHECK(t_max > 0, "CosineAnnealingLR: t_max must be > 0, got ", t_max,
           ". Hint: it is the number of epochs from the base lr down to eta_min.");
  step();  // epoch 0
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  double progress = static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(std::numbers::pi * progress)) / 2;
}

// ---- OneCycleLR ----

namespace {

// Cosine from start (pct 0) to end (pct 1).
double annealing_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor, bool three_phase)
    : LRScheduler(optimizer), total_steps_(total_steps) {
  MG_CHECK(total_steps > 0, "OneCycleLR: total_steps must be > 0, got ", total_steps,
           ". Hint: pass epochs * steps_per_epoch.");
  MG_CHECK(pct_start > 0 && pct_start < 1, "OneCycleLR: pct_start must be in (0, 1), got ", pct_start,
           ". Hint: it is the fraction of the cycle spent increasing the lr.");
  MG_CHECK(max_lr >= 0, "OneCycleLR: max_lr must be >= 0, got ", max_lr);
  MG_CHECK(div_factor > 0 && final_div_factor > 0, "OneCycleLR: div_factor (", div_factor,
           ") and final_div_factor (", final_div_factor, ") must be > 0");
  double initial_lr = max_lr / div_factor;
  double min_lr = initial_lr / final_div_factor;
  double total = static_cast<double>(total_steps);
  // NOTE: end steps are doubles, as in PyTorch (float(pct_start * total_steps) - 1).
  if (three_phase) {
    phases_ = {{pct_start * total - 1, initial_lr, max_lr},
               {2 * pct_start * total - 2, max_lr, initial_lr},
               {total - 1, initial_lr, min_lr}};
  } else {
    phases_ = {{pct_start * total - 1, initial_lr, max_lr}, {total - 1, max_lr, min_lr}};
  }
  step();  // epoch 0
}

double OneCycleLR::lr_at(int64_t epoch, double /*base_lr*/) const {
  MG_CHECK(epoch <= total_steps_, "OneCycleLR: tried to step ", epoch, " times. The specified ",
           "number of total steps is ", total_steps_, ". Hint: make total_steps cover every ",
           "scheduler.step() call (epochs * steps_per_epoch).");
  double step_num = static_cast<double>(epoch);
  double start_step = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& phase = phases_[i];
    if (step_num <= phase.end_step || i + 1 == phases_.size()) {
      double span = phase.end_step - start_step;
      // NOTE: a phase of zero length (a very short cycle) would divide by zero; it is
      // already at its end.
      double pct = span > 0 ? (step_num - start_step) / span : 1.0;
      return annealing_cos(phase.start_lr, phase.end_lr, pct);
    }
    start_step = phase.end_step;
  }
  return phases_.back().end_lr;  // unreachable: the last phase always answers
}

// ---- WarmupCosineLR ----

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                               double min_lr_factor, double start_factor)
    : LRScheduler(optimizer),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps),
      min_lr_factor_(min_lr_factor),
      start_factor_(start_factor) {
  MG_CHECK(warmup_steps >= 0, "WarmupCosineLR: warmup_steps must be >= 0, got ", warmup_steps);
  MG_CHECK(total_steps > warmup_steps, "WarmupCosineLR: total_steps (", total_steps, ") must be greater than ",
           "warmup_steps (", warmup_steps, "). Hint: total_steps counts the warm-up too; the cosine runs from ",
           "warmup_steps to total_steps.");
  MG_CHECK(min_lr_factor >= 0 && min_lr_factor <= 1, "WarmupCosineLR: min_lr_factor must be in [0, 1], got ",
           min_lr_factor, ". Hint: it is the final lr as a fraction of each group's lr (0.1 for nanoGPT's ",
           "min_lr = learning_rate / 10).");
  MG_CHECK(start_factor >= 0 && start_factor <= 1, "WarmupCosineLR: start_factor must be in [0, 1], got ",
           start_factor, ". Hint: it is the first step's lr as a fraction of each group's lr.");
  step();  // epoch 0
}

double WarmupCosineLR::lr_at(int64_t epoch, double base_lr) const {
  if (epoch < warmup_steps_) {
    double progress = static_cast<double>(epoch) / static_cast<double>(warmup_steps_);
    return base_lr * (start_factor_ + (1 - start_factor_) * progress);
  }
  double min_lr = min_lr_factor_ * base_lr;
  if (epoch > total_steps_) return min_lr;
  double progress = static_cast<double>(epoch - warmup_steps_) / static_cast<double>(total_steps_ - warmup_steps_);
  return min_lr + (base_lr - min_lr) * (1 + std::cos(std::numbers::pi * progress)) / 2;
}

}  // namespace mg::optim
