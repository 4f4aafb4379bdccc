// examples/common/mixed_precision.h — the examples' --amp: forward passes under autocast
// (autocast/autocast.h) in float16 or bfloat16, and, for float16, a GradScaler
// (amp/grad_scaler.h) around backward and the optimizer step, as a PyTorch AMP loop:
//
//   examples::MixedPrecision amp(args.amp, args.device);
//   mg::Tensor loss;
//   {
//     examples::AutocastRegion autocast(amp);
//     loss = mg::cross_entropy(model(inputs), targets);
//   }
//   amp.scale(loss).backward();
//   amp.step(optimizer);  // skipped on the device after a float16 overflow
//
// bfloat16 has float32's range, so its gradients need no scaling (PyTorch scales only
// float16 too); without --amp every call passes through and the step is plain float32.
#pragma once

#include <optional>
#include <string>

#include <memgrad/autocast/autocast.h>
#include <memgrad/amp/grad_scaler.h>
#include <memgrad/core/device.h>
#include <memgrad/core/dtype.h>
#include <memgrad/optim/optimizer.h>

namespace examples {

// --amp's value: "fp16" or "bf16" (a 16-bit dtype), "fp32" (none, the default).
std::optional<mg::DType> parse_amp(const std::string& text);
// "fp16", "bf16" or "fp32", as the flag and the summaries spell it.
std::string amp_name(std::optional<mg::DType> dtype);
// Throws UsageError when `dtype` cannot autocast on `device` (float16 is CUDA-only, as in
// PyTorch, whose CPU autocast computes in bfloat16).
void check_amp_device(std::optional<mg::DType> dtype, mg::Device device);

class MixedPrecision {
 public:
  // dtype unset: float32 throughout.
  MixedPrecision(std::optional<mg::DType> dtype, mg::Device device);

  std::optional<mg::DType> dtype() const { return dtype_; }
  mg::Device device() const { return device_; }
  // The loss to call backward on: scaled for float16, else `loss` itself.
  mg::Tensor scale(const mg::Tensor& loss) { return scaler_.scale(loss); }
  // optimizer.step() through the scaler (unscale, skip after an overflow, update the
  // scale) for float16; a plain step otherwise.
  void step(mg::optim::Optimizer& optimizer);
  // The scaler, to save and restore with a checkpoint; disabled unless float16.
  mg::amp::GradScaler& scaler() { return scaler_; }
  const mg::amp::GradScaler& scaler() const { return scaler_; }

 private:
  std::optional<mg::DType> dtype_;
  mg::Device device_;
  mg::amp::GradScaler scaler_;
};

// Autocast on the MixedPrecision's device in its dtype while alive; nothing without one.
class AutocastRegion {
 public:
  explicit AutocastRegion(const MixedPrecision& precision)
      : guard_(precision.dtype().value_or(mg::DType::Float16), precision.device().type,
               precision.dtype().has_value()) {}

 private:
  mg::amp::AutocastGuard guard_;
};

}  // namespace examples
