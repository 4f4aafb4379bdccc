// examples/common/detect_anomaly.h — the examples' --detect-anomaly: the run (training, or
// --bench's steps) under mg::autograd::DetectAnomalyGuard, so that the first NaN or Inf
// gradient ends it with an error naming the backward node, the forward op and the module
// (autograd/anomaly_mode.h; its cost is in docs/debugging.md):
//
//   const mg::autograd::DetectAnomalyGuard detect_anomaly(args.detect_anomaly);
#pragma once

#include <optional>
#include <string>

#include <memgrad/core/dtype.h>

namespace examples {

// The flag's lines for a usage text.
std::string detect_anomaly_usage();

// Throws UsageError where --detect-anomaly cannot do its work: with --amp fp16, whose
// GradScaler meets Inf gradients on purpose (it skips those steps and lowers its scale), and
// in a memory prediction (`predicts_memory`), which runs on the simulated device, where
// tensors hold no values to check.
void check_detect_anomaly(std::optional<mg::DType> amp, bool predicts_memory);

}  // namespace examples
