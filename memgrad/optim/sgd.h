// optim/sgd.h — stochastic gradient descent with optional momentum, dampening, Nesterov
// momentum and L2 weight decay, as torch.optim.SGD.
//
// Memory: one momentum buffer per parameter (the parameter's bytes again) when momentum
// is non-zero; none otherwise.
#pragma once

#include "memgrad/optim/optimizer.h"

namespace mg::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  void add_param_group(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  // momentum, dampening, weight_decay, nesterov.
  std::vector<std::pair<std::string, double>> hyper_parameters(size_t group_index) const override;

 protected:
  // The fused kernels read found_inf() on the device.
  bool skips_on_device() const override { return true; }

 private:
  std::vector<SGDOptions> options_;  // per group; their lr is the group's starting lr only
};

}  // namespace mg::optim
