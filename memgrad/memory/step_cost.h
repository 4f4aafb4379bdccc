// memory/step_cost.h — a training step's time on a GPU, estimated without one: the step
// runs on the simulated device (as a memory prediction does), every kernel call reports
// its work (core/kernel_work.h: FLOPs of its matrix products, bytes of its tensors), and
// each call costs what a roofline gives it on the device's calibrated rates:
//
//   device time of a call = max(FLOPs / matrix rate of its dtype, operations / vector
//                               rate, bytes / memory rate, shortest kernel) + launch gap
//   host time of a call   = issue cost
//   step                  = max(sum of device times, sum of host times)
//
// (the host issues ahead of the device, so whichever is slower bounds the step). Copies
// between the device and the (simulated) host run at the host link's rate. What runs
// outside the kernel table, an offloaded optimizer's host update, is the caller's to add
// (host_adam_seconds).
//
// The rates are calibrated, not datasheet figures: DeviceRates::h100() was fitted to steps
// measured on an H100 80GB HBM3 on 2026-12-07 (docs/memory.md, "Planning for a budget"),
// and its error on the budget plans measured there is tested
// (tests/examples/test_step_time_calibration.cpp; the arithmetic in
// tests/memory/test_step_cost.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "memgrad/core/simulated_kernels.h"

namespace mg::memory {

struct DeviceRates {
  double matrix_16bit_flops_per_s;   // float16 / bfloat16 products on tensor cores
  double matrix_tf32_flops_per_s;    // float32 convolutions (cuDNN allows TF32 by default)
  double matrix_float32_flops_per_s; // float32 matmuls (TF32 off by default, as PyTorch's)
  // A convolution's matrix time in NCHW against NHWC (cuDNN transposes, or picks slower
  // kernels), for 16-bit and for float32 operands.
  double channels_first_slowdown_16bit;
  double channels_first_slowdown_float32;
  double vector_operations_per_s;    // kernel_work.h's vector operations
  double memory_bytes_per_s;         // what streaming kernels reach
  double shortest_kernel_s;          // a launch's floor on the device
  double launch_gap_s;               // added to every kernel: from one's end to the next's start
  double issue_s;                    // the host's cost to issue one kernel
  double host_link_bytes_per_s;      // pinned host <-> device copies
  double host_adam_s_per_element;    // the offloaded AdamW's host update, all cores

  static DeviceRates h100();
};

struct StepCost {
  double device_seconds = 0;
  double host_seconds = 0;
  double flops = 0;
  double bytes = 0;
  int64_t kernel_calls = 0;
  double seconds() const { return device_seconds > host_seconds ? device_seconds : host_seconds; }
  // The cost of one of `steps` alike steps this cost covers.
  StepCost per_step(int64_t steps) const;
};

// While alive, costs every simulated kernel call this thread makes.
class StepCostMeter : public KernelObserver {
 public:
  explicit StepCostMeter(const DeviceRates& rates);
  ~StepCostMeter() override;
  StepCostMeter(const StepCostMeter&) = delete;
  StepCostMeter& operator=(const StepCostMeter&) = delete;

  void observe(const KernelWork& work) override;
  // The cost since construction or the last reset().
  const StepCost& cost() const { return cost_; }
  void reset() { cost_ = {}; }

 private:
  DeviceRates rates_;
  StepCost cost_;
  KernelObserver* previous_;
};

// The host update of an offloaded AdamW over `elements` parameters, with the gradients'
// copy to the host and the parameters' copy back (`bytes_each_way`), on `rates`: `delayed`
// overlaps the update with the next step's device work (ZeRO-Offload's one-step delay), so
// only what exceeds `device_seconds` and half the copies, which contend with the step's own
// traffic, add to the step.
double offloaded_update_seconds(const DeviceRates& rates, int64_t elements, double bytes_each_way, bool delayed,
                                double device_seconds);

}  // namespace mg::memory
