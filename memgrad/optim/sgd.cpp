// optim/sgd.cpp — SGD: option checks and the per-parameter fused update.
#include "memgrad/optim/sgd.h"

#include "memgrad/core/kernels.h"

namespace mg::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) {
  add_param_group(std::move(params), options);
}

void SGD::add_param_group(std::vector<Tensor> params, SGDOptions options) {
  check_non_negative(options.momentum, "momentum value");
  check_non_negative(options.weight_decay, "weight_decay value");
  MG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
           "Nesterov momentum requires a momentum and zero dampening (got momentum ",
           options.momentum, ", dampening ", options.dampening, ")");
  add_group(std::move(params), options.lr);
  options_.push_back(options);
}

void SGD::step() {
  for_each_update([&](size_t group_index, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    const SGDOptions& options = options_[group_index];
    SgdHyper hyper{.lr = param_groups()[group_index].lr,
                   .momentum = options.momentum,
                   .dampening = options.dampening,
                   .weight_decay = options.weight_decay,
                   .nesterov = options.nesterov,
                   .first_step = false,
                   .found_inf = found_inf()};
    const Tensor rate_on_device = lr_on_device(group_index, params[0].device());
    if (rate_on_device.defined()) hyper.lr_on_device = &rate_on_device;
    const KernelTable& device_kernels = kernels(params[0].device());
    if (options.momentum == 0) {
      device_kernels.sgd_step(params, grads, {}, hyper);
      return;
    }
    // A parameter's first step starts its buffer differently (PyTorch's rule), so the
    // parameters without a buffer yet and those with one are updated in two calls.
    std::vector<bool> has_buffer;
    for (const Tensor& param : params) has_buffer.push_back(state_for(param).momentum_buffer.defined());
    for (bool first_step : {true, false}) {
      std::vector<Tensor> step_params, step_grads, buffers;
      for (size_t i = 0; i < params.size(); ++i) {
        if (has_buffer[i] == first_step) continue;
        ParamState& state = state_for(params[i]);
        if (first_step) state.momentum_buffer = new_state(params[i], 0);
        step_params.push_back(params[i]);
        step_grads.push_back(grads[i]);
        buffers.push_back(state.momentum_buffer);
      }
      hyper.first_step = first_step;
      if (!step_params.empty()) device_kernels.sgd_step(step_params, step_grads, buffers, hyper);
    }
  });
}

std::vector<std::pair<std::string, double>> SGD::hyper_parameters(size_t group_index) const {
  const SGDOptions& options = options_.at(group_index);
  return {{"momentum", options.momentum},
          {"dampening", options.dampening},
          {"weight_decay", options.weight_decay},
          {"nesterov", options.nesterov ? 1.0 : 0.0}};
}

}  // namespace mg::optim
