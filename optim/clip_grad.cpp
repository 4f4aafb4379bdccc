// optim/clip_grad.cpp — gradient clipping composed from mg ops (no dedicated kernels: the
// reductions are one pass per gradient, and the scaling is one in-place multiply each).
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/reduce.h"
#include "core/error.h"
#include "core/factory.h"

namespace mg::optim {

namespace {

// The defined, non-empty gradients of `parameters`, checked to share one device.
std::vector<Tensor> gradients_of(const char* op, const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    MG_CHECK(parameters[i].defined(), op, ": parameter ", i, " is an undefined Tensor");
    Tensor grad = parameters[i].grad();
    // NOTE: an empty gradient adds nothing to any norm (and max() of nothing is undefined).
    if (!grad.defined() || grad.numel() == 0) continue;
    MG_CHECK(is_floating(grad.dtype()), op, ": the gradient of parameter ", i, " is ", grad.dtype(),
             "; only floating-point gradients can be clipped");
    if (!grads.empty()) {
      MG_CHECK(grad.device() == grads.front().device(), op, ": gradients are on different devices (",
               grads.front().device(), " and ", grad.device(), " for parameter ", i,
               ", shape ", parameters[i].sizes(), "). Hint: move the whole model to one device, ",
               "or clip each device's parameters separately.");
    }
    grads.push_back(grad);
  }
  return grads;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  NoGradGuard no_grad;
  bool is_inf = std::isinf(norm_type) && norm_type > 0;
  MG_CHECK(is_inf || norm_type > 0, "clip_grad_norm_: norm_type must be > 0 or infinity, got ",
           norm_type, ". Hint: 2.0 for the Euclidean norm, std::numeric_limits<double>::infinity() ",
           "for the largest absolute value.");
  MG_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  std::vector<Tensor> grads = gradients_of("clip_grad_norm_", parameters);
  if (grads.empty()) {
    Device device = parameters.empty() ? Device::cpu() : parameters.front().device();
    return scalar_tensor(0.0, {.device = device});
  }

  // One 0-d partial per gradient, combined on the device.
  Tensor total;
  for (const Tensor& grad : grads) {
    Tensor partial;
    if (is_inf) {
      partial = max(abs(grad));
    } else if (norm_type == 2.0) {
      partial = sum(grad.pow(2.0));
    } else if (norm_type == 1.0) {
      partial = sum(abs(grad));
    } else {
      partial = sum(pow(abs(grad), norm_type));
    }
    if (!total.defined()) {
      total = partial;
    } else {
      total = is_inf ? maximum(total, partial) : add(total, partial);
    }
  }
  if (!is_inf) {
    if (norm_type == 2.0) {
      total = sqrt(total);
    } else if (norm_type != 1.0) {
      total = pow(total, 1.0 / norm_type);
    }
  }

  // coefficient = min(1, max_norm / (total + 1e-6)), as PyTorch: the epsilon keeps a zero
  // norm finite. Multiplying by a coefficient of exactly 1 is the price of not syncing.
  Tensor coefficient = rdiv(max_norm, add(total, 1e-6));
  coefficient = minimum(coefficient, scalar_tensor(1.0, {.dtype = coefficient.dtype(), .device = coefficient.device()}));
  for (const Tensor& grad : grads) grad.mul_(coefficient);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  MG_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be >= 0, got ", clip_value,
           ". Hint: gradients are clamped to [-clip_value, clip_value].");
  for (const Tensor& grad : gradients_of("clip_grad_value_", parameters)) {
    TensorOptions options{.dtype = grad.dtype(), .device = grad.device()};
    Tensor clamped = minimum(maximum(grad, scalar_tensor(-clip_value, options)),
                             scalar_tensor(clip_value, options));
    grad.copy_(clamped);
  }
}

}  // namespace mg::optim
