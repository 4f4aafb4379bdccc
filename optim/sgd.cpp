// optim/sgd.cpp — SGD: option checks and the per-parameter fused update.
#include "optim/sgd.h"

#include "core/kernels.h"

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
  for_each_update([&](size_t group_index, const Tensor& param, const Tensor& grad) {
    const SGDOptions& options = options_[group_index];
    SgdHyper hyper{.lr = param_groups()[group_index].lr,
                   .momentum = options.momentum,
                   .dampening = options.dampening,
                   .weight_decay = options.weight_decay,
                   .nesterov = options.nesterov,
                   .first_step = false};
    Tensor momentum_buffer;
    if (options.momentum != 0) {
      ParamState& state = state_for(param);
      hyper.first_step = !state.momentum_buffer.defined();
      if (hyper.first_step) state.momentum_buffer = new_state(param, 0);
      momentum_buffer = state.momentum_buffer;
    }
    kernels(param.device()).sgd_step(param, grad, momentum_buffer, hyper);
  });
}

}  // namespace mg::optim
