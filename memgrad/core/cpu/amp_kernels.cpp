// core/cpu/amp_kernels.cpp — the CPU side of loss scaling (amp/grad_scaler.h): unscaling
// gradients while looking for inf/NaN (without found_inf, a plain multiply by a scalar
// tensor: clip_grad_norm_'s coefficient), and the scale's update after a step.
//
// Both follow PyTorch's CUDA kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_) term by term, so a CPU run and a CUDA run scale alike.
#include <cmath>
#include <cstdint>
#include <limits>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

void non_finite_check_and_unscale(std::span<const Tensor> grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const double inverse =
      inv_scale.dtype() == DType::Float64 ? *inv_scale.data_ptr<double>() : *inv_scale.data_ptr<float>();
  bool any_non_finite = false;
  for (const Tensor& grad : grads) {
    dispatch_floating(grad.dtype(), "non_finite_check_and_unscale", [&]<class T>() {
      using C = compute_t<T>;
      const C factor = static_cast<C>(inverse);
      T* g = static_cast<T*>(grad.raw_data());
      const int64_t count = grad.numel();
      bool non_finite = false;
#pragma omp parallel for schedule(static) reduction(|| : non_finite) if (count >= kParallelGrain)
      for (int64_t i = 0; i < count; ++i) {
        const C value = static_cast<C>(g[i]);
        // NOTE: the check reads the value before scaling, as PyTorch does: a huge finite
        // gradient stays finite after multiplying by 1/scale <= 1 anyway.
        non_finite = non_finite || !std::isfinite(value);
        g[i] = static_cast<T>(factor == C(1) ? value : value * factor);
      }
      any_non_finite = any_non_finite || non_finite;
    });
  }
  if (any_non_finite && found_inf.defined()) *found_inf.data_ptr<float>() = 1.0f;
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  float& current_scale = *scale.data_ptr<float>();
  int32_t& tracker = *growth_tracker.data_ptr<int32_t>();
  // NOTE: the factors are applied in float32, as PyTorch's kernel takes them.
  if (*found_inf.data_ptr<float>() != 0.0f) {
    current_scale *= static_cast<float>(backoff_factor);
    tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(tracker) + 1;
  if (successful < growth_interval) {
    tracker = static_cast<int32_t>(successful);
    return;
  }
  const float grown = current_scale * static_cast<float>(growth_factor);
  // A scale that would reach inf stays where it is: float32's largest power of two is the ceiling.
  if (std::isfinite(grown)) current_scale = grown;
  tracker = 0;
}

}  // namespace mg::cpu
