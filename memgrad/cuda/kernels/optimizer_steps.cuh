// cuda/kernels/optimizer_steps.cuh — what the CUDA fused optimizer updates share
// (optimizer.cu, adam_8bit.cu): the step counters on the device, the GradScaler's skip
// flag, the learning rate kept on the device, and Adam's constants and per-step scalars.
// optimizer.cu's header note says why the counters take a launch of their own.
#pragma once

#include <span>

#include "memgrad/core/kernels.h"
#include "memgrad/core/optimizer_formulas.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

// Whether a GradScaler found an inf or NaN in this step's gradients (null: no scaler).
__device__ __forceinline__ bool overflowed(const float* found_inf) {
  return found_inf != nullptr && *found_inf != 0.0f;
}

// The device pointers of the update's optional hyper-parameter tensors (null where unset).
struct HyperPointers {
  const float* found_inf;
  const double* lr;
};

// found_inf's and lr_on_device's pointers (either may be null), after checking that each
// is a one-element tensor of its dtype (float32, float64) on `device`.
HyperPointers hyper_pointers(const char* op, const Tensor* found_inf, const Tensor* lr_on_device, Device device);

// Adds 1 to every counter in `steps` (each tensor is a distinct one-element float32),
// unless *found_inf is set; in launches on `stream` that the update kernels follow.
void increment_steps(std::span<const Tensor> steps, const float* found_inf, cudaStream_t stream);

// ---- Adam / AdamW ----

struct AdamConstants {
  double lr, beta1, beta2, eps;
  double beta1_complement, beta2_complement;
  double param_scale;         // AdamW shrinks the parameter: 1 - lr * weight_decay
  double grad_decay;          // Adam adds weight_decay * param to the gradient
  double decoupled_decay;     // AdamW's weight_decay (0 for Adam), for param_scale on the device
};

inline AdamConstants adam_constants(const AdamHyper& hyper) {
  return {.lr = hyper.lr,
          .beta1 = hyper.beta1,
          .beta2 = hyper.beta2,
          .eps = hyper.eps,
          .beta1_complement = 1.0 - hyper.beta1,
          .beta2_complement = 1.0 - hyper.beta2,
          .param_scale = hyper.decoupled_weight_decay ? 1.0 - hyper.lr * hyper.weight_decay : 1.0,
          .grad_decay = hyper.decoupled_weight_decay ? 0.0 : hyper.weight_decay,
          .decoupled_decay = hyper.decoupled_weight_decay ? hyper.weight_decay : 0.0};
}

// `constants` with the learning rate that *lr holds (lr_on_device), where set; param_scale
// rounded as the host's 1.0 - lr * weight_decay (no fused multiply-add), so a step with the
// rate on the device matches one without.
__device__ __forceinline__ void read_lr_on_device(AdamConstants& constants, const double* lr) {
  if (lr == nullptr) return;
  constants.lr = *lr;
  constants.param_scale = __dsub_rn(1.0, __dmul_rn(constants.lr, constants.decoupled_decay));
}

// The per-step scalars from the (already incremented) step count, in double as on the CPU.
struct AdamStepScalars {
  double step_size;         // lr / (1 - beta1^step)
  double correction2_sqrt;  // sqrt(1 - beta2^step)
};

__host__ __device__ __forceinline__ AdamStepScalars adam_step_scalars(const AdamConstants& k, double step_count) {
  return {k.lr / (1.0 - pow(k.beta1, step_count)), sqrt(1.0 - pow(k.beta2, step_count))};
}

// core/optimizer_formulas.h's coefficients, rounded once to the compute type C.
template <class C>
__host__ __device__ __forceinline__ optimizer_formulas::AdamCoefficients<C> adam_coefficients(
    const AdamConstants& k, const AdamStepScalars& scalars) {
  return {.step_size = static_cast<C>(scalars.step_size),
          .correction2_sqrt = static_cast<C>(scalars.correction2_sqrt),
          .beta1_complement = static_cast<C>(k.beta1_complement),
          .beta2 = static_cast<C>(k.beta2),
          .beta2_complement = static_cast<C>(k.beta2_complement),
          .eps = static_cast<C>(k.eps),
          .param_scale = static_cast<C>(k.param_scale),
          .grad_decay = static_cast<C>(k.grad_decay)};
}

}  // namespace mg::cuda
