// nn/checkpoint_sequential.h — checkpointing a Sequential in segments
// (torch.utils.checkpoint.checkpoint_sequential).
//
// The modules are split into `segments` runs of consecutive modules; every run but the last
// goes through mg::checkpoint, so only the segments' inputs stay saved between forward and
// backward. The last run is called normally, as in PyTorch: its activations are needed
// as soon as backward starts, so recomputing them would buy nothing.
#pragma once

#include "memgrad/core/tensor.h"
#include "memgrad/nn/sequential.h"

namespace mg::nn {

// 1 <= segments <= sequence.size(). Each segment holds size() / segments modules, the last
// one the rest.
Tensor checkpoint_sequential(Sequential& sequence, int segments, const Tensor& input);

}  // namespace mg::nn
