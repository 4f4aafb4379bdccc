// memory/cuda_scratch_model.h — the one question core's CUDA scratch model
// (memory/cuda_scratch_model.cpp) asks the cuda/ room: how much workspace cuDNN's choice of
// execution plan needs for a convolution.
//
// NOTE: core cannot include cuda/; as with core/cuda_hooks.h the function is declared here,
// defined in cuda/cudnn/workspace_query.cpp, and called only when memgrad is built with
// cuDNN (MG_WITH_CUDNN), so a CPU-only build never links it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "memgrad/core/dtype.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/shape.h"

namespace mg {

enum class ConvPass : uint8_t { Forward, BackwardInput, BackwardWeight };

// One convolution as cuDNN runs it: every tensor in `layout` (cuda/cudnn/conv.cpp's call
// layout), input (N, C, H, W), weight (K, C/g, R, S), output (N, K, P, Q).
struct ConvCall {
  ConvPass pass;
  DType dtype;
  MemoryFormat layout;
  Shape input, weight, output;
  Window2d window;
};

#ifdef MG_WITH_CUDNN
namespace cuda {
// The workspace bytes of the execution plan cuDNN's heuristics choose for `call` on CUDA
// device 0 with benchmark mode off (data-independent, so the same choice a real run
// makes), or nothing when no GPU is present.
std::optional<size_t> cudnn_heuristic_workspace_bytes(const ConvCall& call);
}  // namespace cuda
#endif

}  // namespace mg
