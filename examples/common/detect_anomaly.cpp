// examples/common/detect_anomaly.cpp — --detect-anomaly's usage lines and its checks.
#include "examples/common/detect_anomaly.h"

#include "examples/common/cli.h"

namespace examples {

std::string detect_anomaly_usage() {
  return R"(  --detect-anomaly         check every gradient backward computes for NaN and Inf and
                           stop at the first bad one with an error naming the backward
                           node, the forward op and the module that made it (autograd's
                           anomaly mode: a debugging aid that slows training, a host sync
                           per gradient on a GPU; not with --amp fp16)
)";
}

void check_detect_anomaly(std::optional<mg::DType> amp, bool predicts_memory) {
  if (amp == mg::DType::Float16) {
    throw UsageError("--detect-anomaly stops at the first Inf gradient, and --amp fp16's GradScaler meets some on "
                     "purpose (it skips those steps and lowers its scale): look for the anomaly with --amp bf16 or "
                     "fp32");
  }
  if (predicts_memory) {
    throw UsageError("--detect-anomaly checks gradients' values; --predict-memory and --fit-batch run on the "
                     "simulated device, which holds none");
  }
}

}  // namespace examples
