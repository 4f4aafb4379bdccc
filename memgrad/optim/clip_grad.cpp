// optim/clip_grad.cpp — gradient clipping. clip_grad_norm_ runs on two multi-tensor kernels,
// as torch's _foreach_norm and _foreach_mul_ do: core/kernels.h's total_norm_power, then
// GradScaler's unscale without its inf check (a plain multiply by a device scalar), so a
// whole model costs a few launches and no temporary the size of a gradient; only the
// 0-d norm and coefficient between them are mg ops. clip_grad_value_ is composed of mg ops.
#include "memgrad/optim/clip_grad.h"

#include <cmath>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/memory/context.h"

namespace mg::optim {

namespace {

// Slots of total_norm_power's partials, one per CUDA block: 1,024 blocks of 256 threads are
// about one full wave on an H200 (132 SMs x 8). 4 KiB (8 in float64), allocated here rather
// than inside the CUDA kernel so that every device, the simulated one included, allocates
// alike.
constexpr int64_t kNormPartials = 1024;

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
  memory::OpScope op("clip_grad_norm_");  // its scratch, in a memory::Recorder
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

  const Device device = grads.front().device();

  // The kernels read a gradient as one flat array: a non-dense one (a view set as .grad) is
  // clipped through a dense copy, written back at the end.
  std::vector<Tensor> dense;
  DType result_dtype = grads.front().dtype();
  for (const Tensor& grad : grads) {
    dense.push_back(is_contiguous_in(grad, suggest_memory_format(grad)) ? grad : contiguous_copy(grad));
    result_dtype = promote_types(result_dtype, grad.dtype());
  }
  // The norm and the coefficient are float32 (float64 if any gradient is) whatever the
  // gradients' dtypes; the norm returned has their promoted dtype, as torch's.
  const TensorOptions accumulate{.dtype = result_dtype == DType::Float64 ? DType::Float64 : DType::Float32,
                                 .device = device};

  Tensor total = empty({}, accumulate);
  {
    TensorOptions workspace = accumulate;
    workspace.category = MemoryCategory::Workspace;
    const Tensor partials = empty({kNormPartials}, workspace);
    kernels(device).total_norm_power(dense, norm_type, partials, total);
  }
  if (!is_inf && norm_type == 2.0) {
    total = sqrt(total);
  } else if (!is_inf && norm_type != 1.0) {
    total = pow(total, 1.0 / norm_type);
  }

  // coefficient = min(1, max_norm / (total + 1e-6)), as PyTorch: the epsilon keeps a zero
  // norm finite. Multiplying by a coefficient of exactly 1 is the price of not syncing.
  Tensor coefficient = rdiv(max_norm, add(total, 1e-6));
  coefficient = minimum(coefficient, scalar_tensor(1.0, accumulate));
  kernels(device).non_finite_check_and_unscale(dense, /*found_inf=*/Tensor(), coefficient);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (dense[i].is_same(grads[i])) {
      grads[i].bump_version();
    } else {
      grads[i].copy_(dense[i]);
    }
  }
  return total.dtype() == result_dtype ? total : total.to(result_dtype);
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
