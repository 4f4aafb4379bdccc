// memory/step_cost.cpp — the roofline of each simulated kernel call (see the header).
#include "memgrad/memory/step_cost.h"

#include <algorithm>

namespace mg::memory {

DeviceRates DeviceRates::h100() {
  // NOTE: fitted by hand to the steps measured on an H100 80GB HBM3 on 2026-12-07 (docs/
  // memory.md, "Planning for a budget", lists each against its prediction): GPT-2 124M b16
  // bf16 with AdamW on the device, 8-bit, offloaded and delayed; ResNet-50 b128 and b256,
  // ResNet-18 b256, fp16 and fp32, channels_last and NCHW; the host update's 0.099 ns an
  // element on 16 cores. The launch gap was fitted to the micro-batched steps of the budget
  // plans measured at commit 35f1c04 (GPT-2 b32 bf16 and ResNet-50 b256 fp16 in 1 to 8
  // micro-batches: each doubling of the kernels added 2.4 to 3.2 us a kernel beyond their
  // rooflines); tests/examples/test_step_time_calibration.cpp holds them within 15%.
  return {.matrix_16bit_flops_per_s = 520e12,
          .matrix_tf32_flops_per_s = 170e12,
          .matrix_float32_flops_per_s = 45e12,
          .channels_first_slowdown_16bit = 2.75,
          .channels_first_slowdown_float32 = 1.5,
          .vector_operations_per_s = 2e12,
          .memory_bytes_per_s = 2.8e12,
          .shortest_kernel_s = 3e-6,
          .launch_gap_s = 3e-6,
          .issue_s = 4e-6,
          .host_link_bytes_per_s = 25e9,
          .host_adam_s_per_element = 0.1e-9};
}

StepCost StepCost::per_step(int64_t steps) const {
  const double n = static_cast<double>(steps);
  return {.device_seconds = device_seconds / n,
          .host_seconds = host_seconds / n,
          .flops = flops / n,
          .bytes = bytes / n,
          .kernel_calls = kernel_calls / steps};
}

StepCostMeter::StepCostMeter(const DeviceRates& rates)
    : rates_(rates), previous_(set_simulated_kernel_observer(this)) {}

StepCostMeter::~StepCostMeter() { set_simulated_kernel_observer(previous_); }

void StepCostMeter::observe(const KernelWork& work) {
  const bool convolution = std::string_view(work.kernel).starts_with("conv2d");
  double matrix_rate = rates_.matrix_16bit_flops_per_s;
  if (work.dtype == DType::Float32) {
    matrix_rate = convolution ? rates_.matrix_tf32_flops_per_s : rates_.matrix_float32_flops_per_s;
  } else if (work.dtype == DType::Float64) {
    matrix_rate = rates_.matrix_float32_flops_per_s / 2;
  }
  if (convolution && work.channels_first) {
    matrix_rate /= is_16_bit_float(work.dtype) ? rates_.channels_first_slowdown_16bit
                                               : rates_.channels_first_slowdown_float32;
  }
  const double memory_rate = work.between_devices ? rates_.host_link_bytes_per_s : rates_.memory_bytes_per_s;
  cost_.device_seconds += std::max({work.flops / matrix_rate, work.operations / rates_.vector_operations_per_s,
                                    work.bytes / memory_rate, rates_.shortest_kernel_s}) +
                           rates_.launch_gap_s;
  cost_.host_seconds += rates_.issue_s;
  cost_.flops += work.flops;
  cost_.bytes += work.bytes;
  ++cost_.kernel_calls;
}

double offloaded_update_seconds(const DeviceRates& rates, int64_t elements, double bytes_each_way, bool delayed,
                                double device_seconds) {
  const double update = rates.host_adam_s_per_element * static_cast<double>(elements);
  const double copies = 2 * bytes_each_way / rates.host_link_bytes_per_s;
  if (!delayed) return update + copies;
  return std::max(update - device_seconds, 0.0) + copies / 2;
}

}  // namespace mg::memory
