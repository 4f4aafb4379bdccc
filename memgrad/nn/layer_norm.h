// nn/layer_norm.h — LayerNorm: normalisation over each sample's trailing dims, PyTorch's
// nn.LayerNorm with the same parameter names ("weight", "bias"), so a transformer's
// state_dict keys match torch's ("transformer.h.0.ln_1.weight").
//
// Memory: weight and bias are normalized_shape PARAMETER elements each; the op saves its
// input and two float32 statistics per normalised row (autograd/layer_norm.h).
#pragma once

#include "memgrad/autograd/layer_norm.h"
#include "memgrad/core/shape.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class LayerNorm : public Module {
 public:
  // Normalises over the last normalized_shape.size() dims of the input, which must equal
  // normalized_shape ({768} for a GPT-2 hidden state). elementwise_affine: learn a scale
  // (weight, starts at 1) and, when `bias`, a shift (bias, starts at 0) of normalized_shape.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);

  // (*, normalized_shape) -> same shape.
  Tensor forward(const Tensor& input) override;
  // A pre-norm residual step: {x + residual, forward(x + residual)}, in one kernel each way
  // where the shapes and dtypes allow (mg::add_layer_norm), named as a call of this layer.
  SumAndNorm forward_add(const Tensor& x, const Tensor& residual);
  // As PyTorch prints it: "(768,), eps=1e-05, elementwise_affine=True".
  std::string extra_repr() const override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // normalized_shape, undefined unless elementwise_affine
  Tensor bias;    // normalized_shape, undefined unless elementwise_affine and bias

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace mg::nn
