// optim/adagrad.cpp — Adagrad: option checks, lazy state, the fused update of a whole group.
#include "memgrad/optim/adagrad.h"

#include "memgrad/core/kernels.h"

namespace mg::optim {

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options) {
  add_param_group(std::move(params), options);
}

void Adagrad::add_param_group(std::vector<Tensor> params, AdagradOptions options) {
  check_non_negative(options.lr_decay, "lr_decay value");
  check_non_negative(options.weight_decay, "weight_decay value");
  check_non_negative(options.initial_accumulator_value, "initial_accumulator_value value");
  check_non_negative(options.eps, "epsilon value");
  add_group(std::move(params), options.lr);
  options_.push_back(options);
}

void Adagrad::step() {
  for_each_update([&](size_t group_index, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    const AdagradOptions& options = options_[group_index];
    AdagradHyper hyper{.lr = param_groups()[group_index].lr,
                       .lr_decay = options.lr_decay,
                       .weight_decay = options.weight_decay,
                       .eps = options.eps,
                       .found_inf = found_inf()};
    const Tensor rate_on_device = lr_on_device(group_index, params[0].device());
    if (rate_on_device.defined()) hyper.lr_on_device = &rate_on_device;
    std::vector<Tensor> sums, steps;
    for (const Tensor& param : params) {
      ParamState& state = state_for(param);
      if (!state.step.defined()) {
        state.step = new_step_counter(param);
        state.sum = new_state(param, options.initial_accumulator_value);
      }
      sums.push_back(state.sum);
      steps.push_back(state.step);
    }
    kernels(params[0].device()).adagrad_step(params, grads, sums, steps, hyper);
  });
}

}  // namespace mg::optim
