// optim/optimizer.h — the base of every optimizer: parameter groups, per-parameter state,
// and the checked loop that hands each (parameter, gradient) pair to a fused update.
//
// Memory: every state tensor (moments, momentum buffers, step counters) is created lazily
// at a parameter's first step and tagged OPTIMIZER_STATE, so an optimizer costs nothing
// until it runs and its bytes show up under their own category; state_bytes() sums them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::optim {

// Parameters that share hyper-parameters. The learning rate lives here because schedulers
// and set_lr() change it between steps; each optimizer keeps its other options per group.
struct ParamGroup {
  std::vector<Tensor> params;
  double lr;
};

// A group's parameters with all of its optimizer's options (Options: AdamWOptions, ...),
// for the constructors that take several groups at once; optim/param_groups.h makes them
// by the usual weight-decay rule.
template <class Options>
struct ParamGroupOptions {
  std::vector<Tensor> params;
  Options options;
};

// One parameter's state, named as in PyTorch's state dict. Each optimizer fills the
// entries it uses and leaves the rest undefined.
struct ParamState {
  Tensor step;             // Adam, Adagrad: one-element float32 counter, kept on the device
  Tensor momentum_buffer;  // SGD with momentum
  Tensor exp_avg;          // Adam: first moment
  Tensor exp_avg_sq;       // Adam: second moment
  Tensor max_exp_avg_sq;   // Adam with amsgrad
  Tensor sum;              // Adagrad: sum of squared gradients
  Tensor master_param;     // offloaded Adam (optim/offloaded_adam.h): the float32 master copy
  // 8-bit Adam (optim/adam_8bit.h): exp_avg and exp_avg_sq then hold uint8 codes, and these
  // the float32 absmax of each block of them.
  Tensor exp_avg_absmax;
  Tensor exp_avg_sq_absmax;

  int64_t bytes() const;
  // No entry defined: the parameter has not been stepped.
  bool empty() const;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient, in place; parameters without one are
  // skipped (as in PyTorch).
  virtual void step() = 0;
  // step(), except that nothing changes (parameters, state, step counters) where found_inf,
  // a one-element float32 on the parameters' device, holds a non-zero value: what a
  // GradScaler calls when an overflow may have happened (amp/grad_scaler.h). SGD, Adam,
  // AdamW and Adagrad decide on the device, inside their fused kernels, so nothing waits
  // for the host; an optimizer that cannot (skips_on_device() false) reads the flag on the
  // host, which synchronises with the device.
  // NOTE: state created by a skipped first step stays as created (zero moments, step 0),
  // which later steps treat exactly like no state — except SGD's momentum buffer, which
  // then starts at (1 - dampening) * grad rather than grad: the same with dampening 0.
  void step_skipping_if(const Tensor& found_inf);
  // Drops the gradients (set_to_none, the default: their GRADIENT bytes are freed) or
  // fills them with zeros.
  void zero_grad(bool set_to_none = true);

  // The first group's learning rate; set_lr() sets every group's, set_group_lr() one's
  // (learning-rate schedulers call it). Where a step may be captured as a CUDA graph, the
  // rate also lives on the device (lr_on_device below), and these update it there, in
  // stream order, so that the graph's replays use it.
  double lr() const;
  void set_lr(double lr);
  void set_group_lr(size_t group_index, double lr);
  // NOTE: add groups with the optimizer's own add_param_group(), which also records that
  // group's options; set learning rates with set_lr or set_group_lr, not by writing
  // ParamGroup::lr, which a captured step would not see.
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  // The state of `param`, or null before its first step (or for stateless updates).
  const ParamState* state(const Tensor& param) const;
  // Bytes of all state tensors.
  int64_t state_bytes() const;

  // ---- for checkpoints (optim/state_dict.h) ----
  // Every parameter of every group, in order: a parameter's index here is its number in a
  // state dict ("state.<index>.exp_avg"), as in PyTorch.
  std::vector<Tensor> all_params() const;
  // Replaces the state of every parameter: `states` holds one entry per all_params() entry
  // (all-undefined for a parameter without state). The caller checks shapes and devices.
  void set_states(std::vector<ParamState> states);
  // A group's hyper-parameters other than lr, under PyTorch's names ("momentum",
  // "weight_decay", ...; booleans as 0 or 1), so a checkpoint can record them and a load
  // can refuse an optimizer built with different ones. Optimizers that do not list theirs
  // record lr alone.
  virtual std::vector<std::pair<std::string, double>> hyper_parameters(size_t group_index) const {
    return {};
  }
  // Where this optimizer keeps `param`'s state tensors (other than the float32 step counter,
  // which follows `device`), so that a checkpoint's are checked and copied there: the
  // parameter's device and dtype, unless the optimizer keeps its state elsewhere (an
  // offloaded one: float32 in host memory, pinned for a CUDA parameter).
  struct StatePlacement {
    Device device;
    DType dtype;
    bool pinned = false;
  };
  virtual StatePlacement state_placement(const Tensor& param) const { return {param.device(), param.dtype()}; }

 protected:
  Optimizer() = default;

  // Checks `params` (floating leaves that require grad, none already in a group) and `lr`,
  // then appends the group.
  void add_group(std::vector<Tensor> params, double lr);
  // Calls update(group_index, param, grad) for every parameter with a gradient, with grad
  // mode off, after checking that the gradient matches; then bumps the param's version.
  // update(group_index, params, grads) receives the parameters of a group that have a
  // gradient, in lists of one device and dtype (what one fused multi-tensor call takes).
  using Update = std::function<void(size_t group_index, const std::vector<Tensor>& params,
                                    const std::vector<Tensor>& grads)>;
  void for_each_update(const Update& update);

  // The flag of the step_skipping_if() in progress, or null: step() hands it to its fused
  // kernels (the hyper-parameters' found_inf, core/kernels.h).
  const Tensor* found_inf() const { return found_inf_; }
  // Whether step() hands found_inf() to its kernels; false makes step_skipping_if() read the
  // flag on the host instead.
  virtual bool skips_on_device() const { return false; }

  // `param`'s state, empty at its first step.
  ParamState& state_for(const Tensor& param) { return state_[param.impl()]; }
  // A new state tensor like `param`, filled with `value`, tagged OPTIMIZER_STATE.
  static Tensor new_state(const Tensor& param, double value);
  // A new step counter for `param`: a 0-d float32 zero on its device, OPTIMIZER_STATE.
  static Tensor new_step_counter(const Tensor& param);
  // The group's learning rate as a one-element float64 on `device`, for the fused updates'
  // hyper.lr_on_device (core/kernels.h); undefined unless made, which happens in a
  // CapturedStep's warm-up (core/graph_capture.h): a captured update then reads the rate
  // from the device, where set_group_lr keeps it current, instead of baking in a number.
  Tensor lr_on_device(size_t group_index, Device device);

 private:
  std::vector<ParamGroup> groups_;
  size_t groups_added_ = 0;  // to catch groups added through param_groups() directly
  const Tensor* found_inf_ = nullptr;  // set during step_skipping_if()
  // Per group: its learning rate on each device it was made for (see lr_on_device).
  std::vector<std::vector<Tensor>> lrs_on_device_;
  // NOTE: keyed by the parameter's TensorImpl, which the groups keep alive; set_data()
  // (a module moved to another device) keeps the impl, so state follows the parameter.
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

// Hyper-parameter checks shared by the optimizers, with PyTorch's messages:
// "Invalid <what>: <value>".
void check_non_negative(double value, const char* what);
void check_beta(double value, int index);
// Adam's and its variants' (8-bit, offloaded): eps, both betas and weight_decay.
void check_adam_hyper(double eps, double beta1, double beta2, double weight_decay);

}  // namespace mg::optim
