// core/optimizer_formulas.h — core room: one element of each fused optimizer update (SGD,
// Adam/AdamW, 8-bit Adam/AdamW, Adagrad), written once for the CPU kernels
// (core/cpu/optimizer_kernels.cpp, adam_8bit.cpp) and the CUDA kernels
// (cuda/kernels/optimizer.cu, adam_8bit.cu), following PyTorch's published
// algorithms term by term, so that both devices match torch.optim to rounding.
//
// Each works on values already read in the compute type C (float for the 16-bit types);
// the caller loads and stores. The per-step scalars (bias corrections, decayed learning
// rate) are computed once a step in double by the caller and rounded to C here.
#pragma once

#include <cstdint>

#include "memgrad/core/host_device.h"
#include "memgrad/core/quantize_8bit.h"

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

// Adam with 8-bit moments (core/quantize_8bit.h): the new parameter from the moments that
// codes first_code and second_code hold in blocks of absmax first_absmax and second_absmax,
// and the new moments, unquantised, in `first` and `second` (the caller requantises them
// once it knows the block's new absmax). The update reads the new moments at full
// precision, as bitsandbytes does; only what is kept between steps is 8-bit. No amsgrad.
template <class C>
MG_HOST_DEVICE inline C adam_8bit_element(C param, C grad, uint8_t first_code, uint8_t second_code,
                                          float first_absmax, float second_absmax, const float* signed_map,
                                          const float* unsigned_map, float& first, float& second,
                                          const AdamCoefficients<C>& k) {
  C first_value = static_cast<C>(quantize_8bit::dequantize(first_code, first_absmax, signed_map));
  C second_value = static_cast<C>(quantize_8bit::dequantize(second_code, second_absmax, unsigned_map));
  C updated = adam_element(param, grad, first_value, second_value, static_cast<C*>(nullptr), k);
  first = static_cast<float>(first_value);
  second = static_cast<float>(second_value);
  return updated;
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
