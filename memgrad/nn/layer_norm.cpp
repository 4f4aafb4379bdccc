// nn/layer_norm.cpp — the layer-norm layer: its parameters, and a call to mg::layer_norm.
#include "memgrad/nn/layer_norm.h"

#include <sstream>

#include "memgrad/core/factory.h"

namespace mg::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias)
    : Module("LayerNorm"), normalized_shape_(normalized_shape), eps_(eps) {
  bool positive = !normalized_shape.empty();
  for (int64_t size : normalized_shape) positive = positive && size > 0;
  MG_CHECK(positive, "LayerNorm(", normalized_shape, "): normalized_shape is the shape of the trailing dims ",
           "each sample is normalised over ({768} for GPT-2's hidden states) and needs at least one ",
           "dimension, each positive");
  MG_CHECK(eps > 0.0, "LayerNorm(", normalized_shape, ", eps=", eps,
           "): eps keeps the division away from zero and must be positive");
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (bias) this->bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& input) { return layer_norm(input, normalized_shape_, weight, bias, eps_); }

SumAndNorm LayerNorm::forward_add(const Tensor& x, const Tensor& residual) {
  NamedCall call(*this);
  return add_layer_norm(x, residual, normalized_shape_, weight, bias, eps_);
}

std::string LayerNorm::extra_repr() const {
  // A Python tuple, as torch prints normalized_shape: "(768,)" or "(4, 5)".
  std::ostringstream text;
  text << "(";
  for (int dim = 0; dim < normalized_shape_.size(); ++dim) {
    text << (dim > 0 ? ", " : "") << normalized_shape_[dim];
  }
  text << (normalized_shape_.size() == 1 ? ",)" : ")") << ", eps=" << eps_
       << ", elementwise_affine=" << (weight.defined() ? "True" : "False");
  return text.str();
}

}  // namespace mg::nn
