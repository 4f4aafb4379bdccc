// autograd/norm.h — batch normalisation over (N, H, W) per channel for (N, C, H, W) or
// (N, C) inputs, training (batch statistics, running statistics updated in place, not
// differentiated) and evaluation (running statistics).
#pragma once

#include "core/tensor.h"

namespace mg {

// weight and bias (C) may be undefined; running_mean / running_var (C) may be undefined
// in training (then nothing is tracked) but are required in evaluation.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

}  // namespace mg
