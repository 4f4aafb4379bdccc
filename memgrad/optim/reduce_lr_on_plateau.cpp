// optim/reduce_lr_on_plateau.cpp — ReduceLROnPlateau, transcribed from torch's step(),
// is_better() and _reduce_lr(). The lrs are written by LRScheduler::step(), which asks
// lr_at for each group, so that last_lrs() and last_epoch() stay the base's as for every
// scheduler.
#include "memgrad/optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::optim {

namespace {

std::vector<double> min_lrs_per_group(const std::vector<double>& given, size_t groups) {
  MG_CHECK(given.size() <= 1 || given.size() == groups, "ReduceLROnPlateau: expected no min_lrs, one for every ",
           "group, or one per parameter group (", groups, "), got ", given.size(), ".");
  for (double min_lr : given) {
    MG_CHECK(std::isfinite(min_lr) && min_lr >= 0, "ReduceLROnPlateau: a min_lr is ", min_lr,
             "; it must be finite and >= 0.");
  }
  if (given.size() == groups) return given;
  return std::vector<double>(groups, given.empty() ? 0.0 : given.front());
}

}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : LRScheduler(optimizer),
      optimizer_(optimizer),
      options_(std::move(options)),
      min_lrs_(min_lrs_per_group(options_.min_lrs, optimizer.param_groups().size())),
      best_(options_.mode == PlateauMode::Min ? std::numeric_limits<double>::infinity()
                                              : -std::numeric_limits<double>::infinity()),
      cursor_(optimizer.param_groups().size()) {
  MG_CHECK(options_.factor >= 0 && options_.factor < 1, "ReduceLROnPlateau: factor must be in [0, 1), got ",
           options_.factor, ". Hint: it multiplies the lr at each reduction (0.1 divides it by 10).");
  MG_CHECK(options_.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got ", options_.patience);
  MG_CHECK(options_.cooldown >= 0, "ReduceLROnPlateau: cooldown must be >= 0, got ", options_.cooldown);
  MG_CHECK(options_.threshold >= 0 && std::isfinite(options_.threshold),
           "ReduceLROnPlateau: threshold must be finite and >= 0, got ", options_.threshold);
  MG_CHECK(options_.eps >= 0, "ReduceLROnPlateau: eps must be >= 0, got ", options_.eps);
  LRScheduler::step();  // epoch 0, every lr as it is
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double threshold = options_.threshold;
  if (options_.mode == PlateauMode::Min) {
    return options_.threshold_mode == ThresholdMode::Rel ? metric < best_ * (1 - threshold)
                                                         : metric < best_ - threshold;
  }
  return options_.threshold_mode == ThresholdMode::Rel ? metric > best_ * (threshold + 1)
                                                       : metric > best_ + threshold;
}

void ReduceLROnPlateau::step(double metric) {
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  reducing_ = num_bad_epochs_ > options_.patience;
  cursor_.reset();
  try {
    LRScheduler::step();
  } catch (...) {
    reducing_ = false;
    throw;
  }
  if (reducing_) {
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
    reducing_ = false;
  }
}

double ReduceLROnPlateau::lr_at(int64_t /*epoch*/, double /*base_lr*/) const {
  const size_t group = cursor_.next();
  const double lr = optimizer_.param_groups()[group].lr;
  if (!reducing_) return lr;
  const double reduced = std::max(lr * options_.factor, min_lrs_[group]);
  return lr - reduced > options_.eps ? reduced : lr;
}

std::vector<std::pair<std::string, Tensor>> ReduceLROnPlateau::state_dict() const {
  std::vector<double> lrs;
  for (const ParamGroup& group : optimizer_.param_groups()) lrs.push_back(group.lr);
  const auto groups = static_cast<int64_t>(lrs.size());
  return {{"best", scalar_tensor(best_, {.dtype = DType::Float64})},
          {"num_bad_epochs", from_vector(std::vector<int64_t>{num_bad_epochs_}, {1}).view({})},
          {"cooldown_counter", from_vector(std::vector<int64_t>{cooldown_counter_}, {1}).view({})},
          {"lrs", from_vector(lrs, {groups})}};
}

void ReduceLROnPlateau::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state,
                                        const std::string& source) {
  std::map<std::string, Tensor> entries;
  for (const auto& [key, tensor] : state) {
    MG_CHECK(key == "best" || key == "num_bad_epochs" || key == "cooldown_counter" || key == "lrs", source,
             ": unexpected entry \"", key, "\"; ReduceLROnPlateau's state holds best, num_bad_epochs, ",
             "cooldown_counter and lrs.");
    MG_CHECK(tensor.defined(), source, ": the entry \"", key, "\" is an undefined tensor.");
    entries[key] = tensor;
  }
  const auto groups = static_cast<int64_t>(optimizer_.param_groups().size());
  auto take = [&](const std::string& key, DType dtype, const Shape& shape) {
    auto found = entries.find(key);
    MG_CHECK(found != entries.end(), source, ": \"", key, "\" is missing. Hint: the state was not written by ",
             "ReduceLROnPlateau::state_dict().");
    const Tensor& tensor = found->second;
    MG_CHECK(tensor.dtype() == dtype && tensor.sizes() == shape, source, ": \"", key, "\" is ", tensor.sizes(), " ",
             tensor.dtype(), " but ReduceLROnPlateau needs ", shape, " ", dtype,
             key == "lrs" ? " (one lr per parameter group). Hint: the optimizer must have the groups it had when "
                            "the state was saved."
                          : ".");
    return tensor.to(Device::cpu());
  };
  const double best = take("best", DType::Float64, {}).item<double>();
  const int64_t num_bad_epochs = take("num_bad_epochs", DType::Int64, {}).item<int64_t>();
  const int64_t cooldown_counter = take("cooldown_counter", DType::Int64, {}).item<int64_t>();
  const std::vector<double> lrs = take("lrs", DType::Float64, {groups}).to_vector<double>();
  MG_CHECK(!std::isnan(best), source, ": best is NaN; it is a metric seen, or +-inf before the first step.");
  MG_CHECK(num_bad_epochs >= 0 && cooldown_counter >= 0, source, ": num_bad_epochs (", num_bad_epochs,
           ") and cooldown_counter (", cooldown_counter, ") are counts, >= 0.");
  for (double lr : lrs) {
    MG_CHECK(std::isfinite(lr) && lr >= 0, source, ": a saved learning rate is ", lr,
             "; learning rates are finite and >= 0.");
  }
  best_ = best;
  num_bad_epochs_ = num_bad_epochs;
  cooldown_counter_ = cooldown_counter;
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_group_lr(g, lrs[g]);
}

}  // namespace mg::optim
