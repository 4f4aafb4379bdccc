// cuda/cudnn/workspace_query.h — how much workspace cuDNN's choice of execution plan needs
// for a convolution, asked without running it: the one fact of the memory predictor
// (memory/cuda_scratch_model.cpp) that only a GPU can give.
//
// Declared without cuDNN types, so that the predictor, built in every build, may include
// it; defined (cuda/cudnn/workspace_query.cpp) and declared only when memgrad is built with
// cuDNN (MG_WITH_CUDNN), so a build without it cannot call it.
#pragma once

#include <cstddef>
#include <optional>

#include "memgrad/cuda/plan/conv_call.h"

#ifdef MG_WITH_CUDNN
namespace mg::cuda {

// The workspace bytes of the execution plan cuDNN's heuristics choose for `call` on CUDA
// device 0 with benchmark mode off (data-independent, so the same choice a real run
// makes), or nothing when no GPU is present.
std::optional<size_t> cudnn_heuristic_workspace_bytes(const ConvCall& call);

}  // namespace mg::cuda
#endif
