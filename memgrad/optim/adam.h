// optim/adam.h — Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight
// decay: the parameter shrinks by lr * weight_decay), as torch.optim.Adam / AdamW.
//
// Memory: two moments per parameter (twice the parameters' bytes), a third with amsgrad,
// and a 4-byte step counter per parameter, kept on the device so no step syncs the host.
#pragma once

#include "memgrad/optim/optimizer.h"

namespace mg::optim {

// Adam's and AdamW's options differ only in weight decay's default, as in PyTorch.
// NOTE: the default comes from a type, not from a `double` template argument, which
// clang 14 (scripts/test-sanitizers' compiler) does not support.
template <class Defaults>
struct AdamFamilyOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = Defaults::kWeightDecay;
  bool amsgrad = false;
};
struct AdamDefaults {
  static constexpr double kWeightDecay = 0.0;
};
struct AdamWDefaults {
  static constexpr double kWeightDecay = 1e-2;
};
using AdamOptions = AdamFamilyOptions<AdamDefaults>;
using AdamWOptions = AdamFamilyOptions<AdamWDefaults>;

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  // Several groups at once, in order (see optim/param_groups.h); at least one.
  explicit Adam(std::vector<ParamGroupOptions<AdamOptions>> groups);
  void add_param_group(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  // beta1, beta2 (PyTorch's betas), eps, weight_decay, amsgrad.
  std::vector<std::pair<std::string, double>> hyper_parameters(size_t group_index) const override;

 protected:
  // The fused kernels read found_inf() on the device.
  bool skips_on_device() const override { return true; }

  // AdamW's entry: the same algorithm with decoupled weight decay in every group.
  explicit Adam(bool decoupled_weight_decay) : decoupled_weight_decay_(decoupled_weight_decay) {}

  // For updates that run elsewhere (optim/offloaded_adam.h): a group's options, and the flag.
  const AdamOptions& group_options(size_t group_index) const { return options_.at(group_index); }
  bool decoupled_weight_decay() const { return decoupled_weight_decay_; }
  // AdamW's options as Adam's: the two types differ only in a default.
  template <class Defaults>
  static AdamOptions as_adam_options(const AdamFamilyOptions<Defaults>& options) {
    return {.lr = options.lr,
            .beta1 = options.beta1,
            .beta2 = options.beta2,
            .eps = options.eps,
            .weight_decay = options.weight_decay,
            .amsgrad = options.amsgrad};
  }

 private:
  bool decoupled_weight_decay_ = false;
  std::vector<AdamOptions> options_;  // per group; their lr is the group's starting lr only
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  // Several groups at once, in order: what optim::weight_decay_groups() returns, e.g. the
  // matrices with weight decay and the biases and norms without.
  explicit AdamW(std::vector<ParamGroupOptions<AdamWOptions>> groups);
  void add_param_group(std::vector<Tensor> params, AdamWOptions options);
};

}  // namespace mg::optim
