// core/cpu/optimizer_kernels.cpp — fused CPU optimizer updates: SGD, Adam/AdamW, Adagrad.
//
// Each update_* function updates one parameter in place in a single pass over its elements,
// with core/optimizer_formulas.h's element arithmetic (the CUDA kernels' too). Per-step
// scalars (bias corrections, decayed learning rate) are computed once in double; the
// element loop runs in the element's compute type.
#include <cmath>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/optimizer_steps.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/optimizer_formulas.h"

namespace mg::cpu {

namespace {

template <class T>
T* data_or_null(const Tensor& tensor) {
  return tensor.defined() ? static_cast<T*>(tensor.raw_data()) : nullptr;
}

// Element i of an optional list, or an undefined tensor when the list is empty.
Tensor optional_at(std::span<const Tensor> list, size_t i) { return list.empty() ? Tensor() : list[i]; }

void update_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdHyper& hyper) {
  dispatch_floating(param.dtype(), "sgd_step", [&]<class T>() {
    using C = compute_t<T>;
    T* p = static_cast<T*>(param.raw_data());
    const T* g = static_cast<const T*>(grad.raw_data());
    T* buf = data_or_null<T>(momentum_buffer);
    const optimizer_formulas::SgdCoefficients<C> k{.lr = static_cast<C>(hyper.lr),
                                                   .momentum = static_cast<C>(hyper.momentum),
                                                   .weight_decay = static_cast<C>(hyper.weight_decay),
                                                   .undampened = static_cast<C>(1.0 - hyper.dampening),
                                                   .nesterov = hyper.nesterov,
                                                   .first_step = hyper.first_step};
    const int64_t count = param.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
      C buffer = buf != nullptr && !hyper.first_step ? static_cast<C>(buf[i]) : C(0);
      p[i] = static_cast<T>(
          optimizer_formulas::sgd_element(static_cast<C>(p[i]), static_cast<C>(g[i]), buf != nullptr, buffer, k));
      if (buf != nullptr) buf[i] = static_cast<T>(buffer);
    }
  });
}

void update_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& step,
               const AdamHyper& hyper) {
  const double step_count = increment_step(step);
  dispatch_floating(param.dtype(), "adam_step", [&]<class T>() {
    using C = compute_t<T>;
    T* p = static_cast<T*>(param.raw_data());
    const T* g = static_cast<const T*>(grad.raw_data());
    T* m = static_cast<T*>(exp_avg.raw_data());
    T* v = static_cast<T*>(exp_avg_sq.raw_data());
    T* v_max = data_or_null<T>(max_exp_avg_sq);
    const optimizer_formulas::AdamCoefficients<C> k = adam_coefficients<C>(hyper, step_count);
    const int64_t count = param.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
      C first = static_cast<C>(m[i]), second = static_cast<C>(v[i]);
      C max_second = v_max != nullptr ? static_cast<C>(v_max[i]) : C(0);
      C updated = optimizer_formulas::adam_element(static_cast<C>(p[i]), static_cast<C>(g[i]), first, second,
                                                   v_max != nullptr ? &max_second : nullptr, k);
      m[i] = static_cast<T>(first);
      v[i] = static_cast<T>(second);
      if (v_max != nullptr) v_max[i] = static_cast<T>(max_second);
      p[i] = static_cast<T>(updated);
    }
  });
}

void update_adagrad(const Tensor& param, const Tensor& grad, const Tensor& state_sum, const Tensor& step,
                    const AdagradHyper& hyper) {
  const double step_count = increment_step(step);
  const double decayed_lr = hyper.lr / (1.0 + (step_count - 1.0) * hyper.lr_decay);
  dispatch_floating(param.dtype(), "adagrad_step", [&]<class T>() {
    using C = compute_t<T>;
    T* p = static_cast<T*>(param.raw_data());
    const T* g = static_cast<const T*>(grad.raw_data());
    T* sum = static_cast<T*>(state_sum.raw_data());
    const C clr = decayed_lr, weight_decay = hyper.weight_decay, eps = hyper.eps;
    const int64_t count = param.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
      C accumulated = static_cast<C>(sum[i]);
      p[i] = static_cast<T>(optimizer_formulas::adagrad_element(static_cast<C>(p[i]), static_cast<C>(g[i]),
                                                                accumulated, clr, weight_decay, eps));
      sum[i] = static_cast<T>(accumulated);
    }
  });
}

}  // namespace

// On the CPU a list is updated one parameter after another: there is no launch to save.
void sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
              std::span<const Tensor> momentum_buffers, const SgdHyper& given) {
  if (overflowed(given.found_inf)) return;
  const SgdHyper hyper = with_lr_on_device(given);
  for (size_t i = 0; i < params.size(); ++i) update_sgd(params[i], grads[i], optional_at(momentum_buffers, i), hyper);
}

void adam_step(std::span<const Tensor> params, std::span<const Tensor> grads,
               std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
               std::span<const Tensor> max_exp_avg_sqs, std::span<const Tensor> steps,
               const AdamHyper& given) {
  if (overflowed(given.found_inf)) return;
  const AdamHyper hyper = with_lr_on_device(given);
  for (size_t i = 0; i < params.size(); ++i) {
    update_adam(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], optional_at(max_exp_avg_sqs, i), steps[i], hyper);
  }
}

void adagrad_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
                  std::span<const Tensor> steps, const AdagradHyper& given) {
  if (overflowed(given.found_inf)) return;
  const AdagradHyper hyper = with_lr_on_device(given);
  for (size_t i = 0; i < params.size(); ++i) update_adagrad(params[i], grads[i], state_sums[i], steps[i], hyper);
}

}  // namespace mg::cpu
