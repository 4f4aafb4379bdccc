// optim/adagrad.cpp — Adagrad: option checks, lazy state, the per-parameter fused update.
#include "optim/adagrad.h"

#include "core/kernels.h"

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
                       .eps = options.eps};
    for (size_t i = 0; i < params.size(); ++i) {
      ParamState& state = state_for(params[i]);
      if (!state.step.defined()) {
        state.step = new_step_counter(params[i]);
        state.sum = new_state(params[i], options.initial_accumulator_value);
      }
      kernels(params[i].device()).adagrad_step(params[i], grads[i], state.sum, state.step, hyper);
    }
  });
}

}  // namespace mg::optim
