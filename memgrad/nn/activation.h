// nn/activation.h — parameter-free layers: ReLU, GELU, Dropout, Flatten.
#pragma once

#include <cstdint>

#include "memgrad/autograd/unary.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

// The exact (erf) form by default, as PyTorch's; GeluApproximate::Tanh is the tanh
// approximation GPT-2 was trained with (torch's approximate='tanh').
class GELU : public Module {
 public:
  explicit GELU(GeluApproximate approximate = GeluApproximate::None)
      : Module("GELU"), approximate_(approximate) {}
  Tensor forward(const Tensor& input) override;
  // As PyTorch prints it: "approximate='none'" or "approximate='tanh'".
  std::string extra_repr() const override;
  GeluApproximate approximate() const { return approximate_; }

 private:
  GeluApproximate approximate_;
};

// Zeroes each element with probability p and scales the rest by 1 / (1 - p) in training
// mode; the identity in evaluation mode (eval()).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p() const { return p_; }

 private:
  double p_;
};

// Flattens dimensions start_dim..end_dim into one; by default every dimension but the batch.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

}  // namespace mg::nn
