// examples/common/mixed_precision.cpp — --amp's parsing and the scaled optimizer step.
#include "examples/common/mixed_precision.h"

#include "examples/common/cli.h"

namespace examples {

std::optional<mg::DType> parse_amp(const std::string& text) {
  if (text == "fp16") return mg::DType::Float16;
  if (text == "bf16") return mg::DType::BFloat16;
  if (text == "fp32") return std::nullopt;
  throw UsageError("--amp must be fp16, bf16 or fp32, got '" + text + "'");
}

std::string amp_name(std::optional<mg::DType> dtype) {
  if (!dtype) return "fp32";
  return *dtype == mg::DType::Float16 ? "fp16" : "bf16";
}

void check_amp_device(std::optional<mg::DType> dtype, mg::Device device) {
  if (dtype == mg::DType::Float16 && !device.is_cuda()) {
    throw UsageError("--amp fp16 needs --device cuda; on the CPU autocast computes in bfloat16 (--amp bf16)");
  }
}

MixedPrecision::MixedPrecision(std::optional<mg::DType> dtype, mg::Device device)
    : dtype_(dtype), device_(device), scaler_({.enabled = dtype == mg::DType::Float16}) {}

void MixedPrecision::step(mg::optim::Optimizer& optimizer) {
  scaler_.step(optimizer);
  scaler_.update();
}

}  // namespace examples
