// core/cpu/optimizer_steps.h — what the CPU's fused optimizer updates share
// (optimizer_kernels.cpp, adam_8bit.cpp): the step counter, the GradScaler's skip flag,
// the learning rate kept on the device, and Adam's per-step coefficients, each read or
// computed once per parameter as their contracts in core/kernel_list.h say.
#pragma once

#include <cmath>

#include "memgrad/core/kernels.h"
#include "memgrad/core/optimizer_formulas.h"
#include "memgrad/core/tensor.h"

namespace mg::cpu {

// The step counter is a float32 tensor owned by the optimizer state; on the CPU "reading
// it on the device" is reading host memory. Returns the incremented count.
inline double increment_step(const Tensor& step) {
  float& counter = *step.data_ptr<float>();
  counter += 1.0f;
  return counter;
}

// Whether a GradScaler found an inf or NaN in this step's gradients, so that the update of
// the whole list is skipped (parameters, state, step counters). On the CPU the flag is host
// memory: reading it is no sync.
inline bool overflowed(const Tensor* found_inf) {
  return found_inf != nullptr && *found_inf->data_ptr<float>() != 0.0f;
}

// The hyper-parameters with the learning rate that lr_on_device holds, where set (host
// memory on the CPU, so reading it is no sync).
template <class Hyper>
Hyper with_lr_on_device(Hyper hyper) {
  if (hyper.lr_on_device != nullptr) hyper.lr = *hyper.lr_on_device->template data_ptr<double>();
  return hyper;
}

// Adam's coefficients at `step_count` (already incremented), the per-step scalars in double
// rounded once to the compute type C. AdamW shrinks the parameter; Adam adds the decay to
// the gradient.
template <class C>
optimizer_formulas::AdamCoefficients<C> adam_coefficients(const AdamHyper& hyper, double step_count) {
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, step_count);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(hyper.beta2, step_count));
  return {.step_size = static_cast<C>(hyper.lr / bias_correction1),
          .correction2_sqrt = static_cast<C>(bias_correction2_sqrt),
          .beta1_complement = static_cast<C>(1.0 - hyper.beta1),
          .beta2 = static_cast<C>(hyper.beta2),
          .beta2_complement = static_cast<C>(1.0 - hyper.beta2),
          .eps = static_cast<C>(hyper.eps),
          .param_scale = static_cast<C>(hyper.decoupled_weight_decay ? 1.0 - hyper.lr * hyper.weight_decay : 1.0),
          .grad_decay = static_cast<C>(hyper.decoupled_weight_decay ? 0.0 : hyper.weight_decay)};
}

}  // namespace mg::cpu
