// optim/optimizer.cpp — parameter groups, their validation, the update loop, and state
// bookkeeping shared by every optimizer.
#include "memgrad/optim/optimizer.h"

#include <algorithm>

#include <unordered_set>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/memory/context.h"
#include "memgrad/core/memory_format.h"

namespace mg::optim {

int64_t ParamState::bytes() const {
  int64_t total = 0;
  for (const Tensor* tensor : {&step, &momentum_buffer, &exp_avg, &exp_avg_sq, &max_exp_avg_sq, &sum, &master_param,
                                &exp_avg_absmax, &exp_avg_sq_absmax}) {
    if (tensor->defined()) total += static_cast<int64_t>(tensor->nbytes());
  }
  return total;
}

bool ParamState::empty() const {
  return !step.defined() && !momentum_buffer.defined() && !exp_avg.defined() && !exp_avg_sq.defined() &&
         !max_exp_avg_sq.defined() && !sum.defined() && !master_param.defined() && !exp_avg_absmax.defined() &&
         !exp_avg_sq_absmax.defined();
}

void check_non_negative(double value, const char* what) {
  // NOTE: value >= 0 is false for NaN, which is refused too.
  MG_CHECK(value >= 0, "Invalid ", what, ": ", value, " (must be >= 0)");
}

void check_beta(double value, int index) {
  MG_CHECK(value >= 0 && value < 1, "Invalid beta parameter at index ", index, ": ", value,
           " (must be in [0, 1))");
}

void check_adam_hyper(double eps, double beta1, double beta2, double weight_decay) {
  check_non_negative(eps, "epsilon value");
  check_beta(beta1, 0);
  check_beta(beta2, 1);
  check_non_negative(weight_decay, "weight_decay value");
}

void Optimizer::add_group(std::vector<Tensor> params, double lr) {
  MG_CHECK(!params.empty(), "optimizer got an empty parameter list. Hint: pass the model's ",
           "parameters(), and check that the model has some.");
  check_non_negative(lr, "learning rate");
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) seen.insert(param.impl());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& param = params[i];
    MG_CHECK(param.defined(), "optimizer can only optimize Tensors, but parameter ", i,
             " is an undefined Tensor");
    MG_CHECK(is_floating(param.dtype()), "optimizer: parameter ", i, " (shape ", param.sizes(),
             ") is ", param.dtype(), "; only floating-point tensors can be optimized");
    MG_CHECK(param.is_leaf(), "can't optimize a non-leaf Tensor: parameter ", i, " (shape ",
             param.sizes(), ") was computed by an op. Hint: optimize the leaf it came from, or ",
             "make a new leaf with .detach().requires_grad_().");
    MG_CHECK(param.requires_grad(), "optimizer: parameter ", i, " (shape ", param.sizes(),
             ") does not require grad, so it would never be updated. Hint: call ",
             ".requires_grad_() on it, or leave it out.");
    MG_CHECK(seen.insert(param.impl()).second, "some parameters appear in more than one ",
             "parameter group: parameter ", i, " (shape ", param.sizes(), ") is already ",
             "being optimized. Hint: pass each parameter once.");
  }
  groups_.push_back({std::move(params), lr});
  ++groups_added_;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  memory::OpScope op("Optimizer.zero_grad");  // the gradients it frees, in a memory::Recorder
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        param.set_grad(Tensor());
      } else {
        grad.zero_();
      }
    }
  }
}

void Optimizer::step_skipping_if(const Tensor& found_inf) {
  MG_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == DType::Float32,
           "optimizer.step_skipping_if(): found_inf must be a one-element float32 tensor, got ",
           found_inf.defined() ? detail::str_cat(found_inf.sizes(), " ", found_inf.dtype()) : "an undefined tensor",
           ". Hint: pass the flag a GradScaler's unscale_() wrote.");
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      MG_CHECK(param.device() == found_inf.device(), "optimizer.step_skipping_if(): found_inf is on ",
               found_inf.device(), " but a parameter (shape ", param.sizes(), ") is on ", param.device(),
               ". Hint: the flag must live where the parameters' kernels run.");
    }
  }
  if (!skips_on_device()) {
    // NOTE: item() waits for the device; only optimizers without a device-side skip get here.
    if (found_inf.item<float>() == 0.0f) step();
    return;
  }
  // Cleared however step() ends, so that a later plain step() never skips.
  struct ClearOnExit {
    const Tensor*& flag;
    ~ClearOnExit() { flag = nullptr; }
  } clear{found_inf_};
  found_inf_ = &found_inf;
  step();
}

double Optimizer::lr() const { return groups_.front().lr; }

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(size_t group_index, double lr) {
  MG_CHECK(group_index < groups_.size(), "set_group_lr: group ", group_index, " does not exist; the optimizer has ",
           groups_.size(), " groups.");
  check_non_negative(lr, "learning rate");
  const bool on_devices = group_index < lrs_on_device_.size() && !lrs_on_device_[group_index].empty();
  if (on_devices) {
    refuse_during_graph_capture("changing the learning rate",
                                "change it between replays (a scheduler's step() after replay()), not inside the step.");
  }
  groups_[group_index].lr = lr;
  if (!on_devices) return;
  for (const Tensor& on_device : lrs_on_device_[group_index]) on_device.fill_(lr);
}

Tensor Optimizer::lr_on_device(size_t group_index, Device device) {
  if (lrs_on_device_.size() < groups_.size()) lrs_on_device_.resize(groups_.size());
  std::vector<Tensor>& made = lrs_on_device_[group_index];
  for (const Tensor& on_device : made) {
    if (on_device.device() == device) return on_device;
  }
  MG_CHECK(!graph_capture_underway(), "optimizer.step() is being captured as a CUDA graph without having run in "
           "a warm-up first, so its learning rate would be baked into the graph. Hint: capture through "
           "cuda::CapturedStep, whose warm-up runs the step before capturing it.");
  if (!graph_warmup_underway()) return Tensor();
  made.push_back(full({}, groups_[group_index].lr,
                      {.dtype = DType::Float64, .device = device, .category = MemoryCategory::OptimizerState}));
  return made.back();
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto found = state_.find(param.impl());
  return found == state_.end() ? nullptr : &found->second;
}

int64_t Optimizer::state_bytes() const {
  int64_t total = 0;
  for (const auto& [param, state] : state_) total += state.bytes();
  return total;
}

std::vector<Tensor> Optimizer::all_params() const {
  std::vector<Tensor> params;
  for (const ParamGroup& group : groups_) params.insert(params.end(), group.params.begin(), group.params.end());
  return params;
}

void Optimizer::set_states(std::vector<ParamState> states) {
  const std::vector<Tensor> params = all_params();
  MG_ASSERT(states.size() == params.size(), "set_states: ", states.size(), " states for ",
            params.size(), " parameters");
  state_.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!states[i].empty()) state_[params[i].impl()] = std::move(states[i]);
  }
}

void Optimizer::for_each_update(const Update& update) {
  MG_CHECK(groups_.size() == groups_added_, "optimizer.step(): param_groups() has ",
           groups_.size(), " groups but ", groups_added_, " were added with their options. ",
           "Hint: add groups with the optimizer's add_param_group(params, options).");
  NoGradGuard no_grad;
  // Every optimizer's step() runs through here, so its memory (state created at the first
  // step, scratch of the updates) shows as the optimizer phase in a memory::Recorder.
  memory::PhaseScope optimizer_phase(memory::Phase::Optimizer);
  memory::OpScope op("Optimizer.step");
  for (size_t group_index = 0; group_index < groups_.size(); ++group_index) {
    const std::vector<Tensor>& params = groups_[group_index].params;
    // One list pair per (device, dtype) in the group, in parameter order.
    std::vector<std::pair<std::vector<Tensor>, std::vector<Tensor>>> lists;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& param = params[i];
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      MG_CHECK(grad.sizes() == param.sizes() && grad.dtype() == param.dtype() &&
                   grad.device() == param.device(),
               "optimizer.step(): parameter ", i, " of group ", group_index, " is ",
               param.sizes(), " ", param.dtype(), " on ", param.device(),
               " but its gradient is ", grad.sizes(), " ", grad.dtype(), " on ", grad.device(),
               ". Hint: a gradient must match its parameter; check code that sets .grad.");
      // NOTE: the fused updates walk parameter, gradient and state as flat arrays, so all
      // three must be dense in one layout: the parameter's (NCHW, or channels-last after
      // Module::to(MemoryFormat::ChannelsLast)); new_state() follows the parameter.
      const MemoryFormat format = suggest_memory_format(param);
      MG_CHECK(is_contiguous_in(param, format), "optimizer.step(): parameter ", i, " of group ",
               group_index, " (shape ", param.sizes(), ", strides ", param.strides(), ") is not ",
               "dense; the fused updates need dense parameters. Hint: optimize a contiguous leaf.");
      if (!is_contiguous_in(grad, format)) grad = contiguous_copy(grad, format);
      auto same_kind = [&](const auto& list) {
        return list.first[0].device() == param.device() && list.first[0].dtype() == param.dtype();
      };
      auto list = std::find_if(lists.begin(), lists.end(), same_kind);
      if (list == lists.end()) list = lists.emplace(lists.end());
      list->first.push_back(param);
      list->second.push_back(grad);
    }
    for (const auto& [list_params, list_grads] : lists) {
      update(group_index, list_params, list_grads);
      for (const Tensor& param : list_params) param.bump_version();
    }
  }
}

Tensor Optimizer::new_state(const Tensor& param, double value) {
  Tensor state = empty(param.sizes(),
                       {.dtype = param.dtype(), .device = param.device(), .category = MemoryCategory::OptimizerState},
                       suggest_memory_format(param));
  state.fill_(value);
  return state;
}

Tensor Optimizer::new_step_counter(const Tensor& param) {
  return zeros({}, {.dtype = DType::Float32, .device = param.device(),
                    .category = MemoryCategory::OptimizerState});
}

}  // namespace mg::optim
