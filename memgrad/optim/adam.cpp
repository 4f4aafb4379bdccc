// optim/adam.cpp — Adam and AdamW: option checks, lazy state, the per-parameter fused
// update. AdamW is Adam with one flag set.
#include "memgrad/optim/adam.h"

#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/kernels.h"

namespace mg::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options) {
  add_param_group(std::move(params), options);
}

Adam::Adam(std::vector<ParamGroupOptions<AdamOptions>> groups) {
  MG_CHECK(!groups.empty(), "Adam got no parameter groups. Hint: pass at least one {params, options}.");
  for (ParamGroupOptions<AdamOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

void Adam::add_param_group(std::vector<Tensor> params, AdamOptions options) {
  check_adam_hyper(options.eps, options.beta1, options.beta2, options.weight_decay);
  add_group(std::move(params), options.lr);
  options_.push_back(options);
}

void Adam::step() {
  for_each_update([&](size_t group_index, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    const AdamOptions& options = options_[group_index];
    std::vector<Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    for (const Tensor& param : params) {
      ParamState& state = state_for(param);
      if (!state.step.defined()) {
        state.step = new_step_counter(param);
        state.exp_avg = new_state(param, 0);
        state.exp_avg_sq = new_state(param, 0);
        if (options.amsgrad) state.max_exp_avg_sq = new_state(param, 0);
      }
      exp_avgs.push_back(state.exp_avg);
      exp_avg_sqs.push_back(state.exp_avg_sq);
      if (options.amsgrad) max_exp_avg_sqs.push_back(state.max_exp_avg_sq);
      steps.push_back(state.step);
    }
    AdamHyper hyper{.lr = param_groups()[group_index].lr,
                    .beta1 = options.beta1,
                    .beta2 = options.beta2,
                    .eps = options.eps,
                    .weight_decay = options.weight_decay,
                    .decoupled_weight_decay = decoupled_weight_decay_,
                    .amsgrad = options.amsgrad,
                    .found_inf = found_inf()};
    const Tensor rate_on_device = lr_on_device(group_index, params[0].device());
    if (rate_on_device.defined()) hyper.lr_on_device = &rate_on_device;
    kernels(params[0].device()).adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, hyper);
  });
}

std::vector<std::pair<std::string, double>> Adam::hyper_parameters(size_t group_index) const {
  const AdamOptions& options = options_.at(group_index);
  return {{"beta1", options.beta1},
          {"beta2", options.beta2},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay},
          {"amsgrad", options.amsgrad ? 1.0 : 0.0}};
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(/*decoupled_weight_decay=*/true) {
  add_param_group(std::move(params), options);
}

AdamW::AdamW(std::vector<ParamGroupOptions<AdamWOptions>> groups) : Adam(/*decoupled_weight_decay=*/true) {
  MG_CHECK(!groups.empty(), "AdamW got no parameter groups. Hint: pass at least one {params, options}, e.g. ",
           "optim::weight_decay_groups(model, options).");
  for (ParamGroupOptions<AdamWOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

void AdamW::add_param_group(std::vector<Tensor> params, AdamWOptions options) {
  Adam::add_param_group(std::move(params), as_adam_options(options));
}

}  // namespace mg::optim
