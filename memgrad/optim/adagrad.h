// optim/adagrad.h — Adagrad: per-element learning rates from the running sum of squared
// gradients, with optional learning-rate decay and L2 weight decay, as torch.optim.Adagrad.
//
// Memory: the sum (the parameter's bytes again) and a 4-byte step counter per parameter.
#pragma once

#include "memgrad/optim/optimizer.h"

namespace mg::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  void add_param_group(std::vector<Tensor> params, AdagradOptions options);
  void step() override;

 protected:
  // The fused kernels read found_inf() on the device.
  bool skips_on_device() const override { return true; }

 private:
  std::vector<AdagradOptions> options_;  // per group; their lr is the group's starting lr only
};

}  // namespace mg::optim
