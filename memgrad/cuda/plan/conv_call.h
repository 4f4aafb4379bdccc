// cuda/plan/conv_call.h — one convolution as cuDNN runs it (cuda/cudnn/conv.cpp): the pass,
// the dtype, the one layout all three tensors are in (cuda/plan/conv_layout.h), their sizes
// and the window. What the memory predictor (memory/cuda_scratch_model.cpp) hands to
// cuda/cudnn/workspace_query.h to learn the workspace cuDNN would choose for the call.
#pragma once

#include <cstdint>

#include "memgrad/core/dtype.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/shape.h"

namespace mg::cuda {

// BackwardInputAccumulate adds to the input's gradient (cuDNN's beta = 1), which may pick
// another engine, with another workspace, than BackwardInput.
enum class ConvPass : uint8_t { Forward, BackwardInput, BackwardWeight, BackwardInputAccumulate };

// input (N, C, H, W), weight (K, C/g, R, S), output (N, K, P, Q), every one in `layout`.
struct ConvCall {
  ConvPass pass;
  DType dtype;
  MemoryFormat layout;
  Shape input, weight, output;
  Window2d window;
};

}  // namespace mg::cuda
