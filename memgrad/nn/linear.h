// nn/linear.h — Linear: y = x @ weight^T + bias, PyTorch's nn.Linear with its default
// initialisation.
#pragma once

#include <cstdint>

#include "memgrad/core/random.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class Linear : public Module {
 public:
  // weight and bias start uniform in [-1/sqrt(in_features), 1/sqrt(in_features)], drawn from
  // `generator` (default: the process-wide one), exactly as torch.nn.Linear initialises them.
  Linear(int64_t in_features, int64_t out_features, bool has_bias = true, Generator* generator = nullptr);

  // (*, in_features) -> (*, out_features)
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features), undefined when built without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace mg::nn
