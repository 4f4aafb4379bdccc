// nn/linear.cpp — the fully connected layer.
#include "memgrad/nn/linear.h"

#include <cmath>

#include "memgrad/autograd/matmul.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/init.h"

namespace mg::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, Generator* generator)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  MG_CHECK(in_features >= 0 && out_features >= 0, "Linear(", in_features, ", ", out_features,
           "): the numbers of features must be non-negative");
  weight = register_parameter("weight", empty({out_features, in_features}));
  // NOTE: a = sqrt(5) is PyTorch's choice (reset_parameters): with the leaky_relu gain it
  // gives bound = sqrt(3) * sqrt(2 / 6) / sqrt(fan_in) = 1 / sqrt(fan_in).
  init::kaiming_uniform_(weight, std::sqrt(5.0), generator);
  if (has_bias) {
    bias = register_parameter("bias", empty({out_features}));
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor Linear::forward(const Tensor& input) { return mg::linear(input, weight, bias); }

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features_, ", out_features=", out_features_,
                         ", bias=", bias.defined() ? "true" : "false");
}

}  // namespace mg::nn
