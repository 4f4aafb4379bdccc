// core/optimizer_formulas.h — core room: one element of each fused optimizer update (SGD,
// Adam/AdamW, Adagrad), written once for the CPU kernels (core/cpu/optimizer_kernels.cpp)
// and the CUDA kernels (cuda/kernels/optimizer.cu), following PyTorch's published
// algorithms term by term, so that both devices match torch.optim to rounding.
//
// Each works on values already read in the compute type C (float for the 16-bit types);
// the caller loads and stores. The per-step scalars (bias corrections, decayed learning
// rate) are computed once a step in double by the caller and rounded to C here.
#pragma once

#include "memgrad/core/host_device.h"

namespace mg::optimizer_formulas {

template <class C>
struct SgdCoefficients {
  C lr, momentum, weight_decay, undampened;  // undampened = 1 - dampening
  bool nesterov;
  bool first_step;  // the momentum buffer starts as d_p itself, undampened (as PyTorch)
};

// The new parameter; with a momentum buffer (has_buffer) also its new value in `buffer`.
template <class C>
MG_HOST_DEVICE inline C sgd_element(C param, C grad, bool has_buffer, C& buffer, const SgdCoefficients<C>& k) {
  C d_p = grad;
  if (k.weight_decay != C(0)) d_p += k.weight_decay * param;
  if (has_buffer) {
    buffer = k.first_step ? d_p : k.momentum * buffer + k.undampened * d_p;
    d_p = k.nesterov ? d_p + k.momentum * buffer : buffer;
  }
  return param - k.lr * d_p;
}

template <class C>
struct AdamCoefficients {
  C step_size;         // lr / (1 - beta1^step)
  C correction2_sqrt;  // sqrt(1 - beta2^step)
  C beta1_complement, beta2, beta2_complement, eps;
  C param_scale;  // AdamW shrinks the parameter: 1 - lr * weight_decay (1 for Adam)
  C grad_decay;   // Adam adds weight_decay * param to the gradient (0 for AdamW)
};

// The new parameter, and the new moments in `first` and `second`; with amsgrad
// (max_second not null) the running maximum of the second moment, which the denominator
// then reads, in *max_second.
template <class C>
MG_HOST_DEVICE inline C adam_element(C param, C grad, C& first, C& second, C* max_second,
                                     const AdamCoefficients<C>& k) {
  C gradient = grad;
  if (k.grad_decay != C(0)) gradient += k.grad_decay * param;
  // NOTE: m + (1 - beta1) (g - m) is torch's lerp_, not beta1 m + (1 - beta1) g.
  first += k.beta1_complement * (gradient - first);
  second = k.beta2 * second + k.beta2_complement * gradient * gradient;
  C denominator_second = second;
  if (max_second != nullptr) {
    *max_second = *max_second < second ? second : *max_second;  // std::max(previous, second)
    denominator_second = *max_second;
  }
  C denom = math::sqrt(denominator_second) / k.correction2_sqrt + k.eps;
  return param * k.param_scale - k.step_size * (first / denom);
}

// The new parameter, and the new sum of squared gradients in `sum`; clr is the decayed
// learning rate lr / (1 + (step - 1) lr_decay).
template <class C>
MG_HOST_DEVICE inline C adagrad_element(C param, C grad, C& sum, C clr, C weight_decay, C eps) {
  C gradient = grad;
  if (weight_decay != C(0)) gradient += weight_decay * param;
  sum += gradient * gradient;
  return param - clr * (gradient / (math::sqrt(sum) + eps));
}

}  // namespace mg::optimizer_formulas
