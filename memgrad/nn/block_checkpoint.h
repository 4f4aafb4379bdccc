// nn/block_checkpoint.h — how a model checkpoints its blocks in training (GPTOptions,
// ResNetOptions): not at all, selectively, or whole.
//
// Memory and compute of one step, from most memory to least:
//   None       every block's activations stay saved through the forward;
//   Selective  each block keeps its input and the outputs of the op kinds the policy names
//              (a GPT's matmuls and attention, a ResNet's convolutions); backward runs only
//              the cheap ops again (norms, activations, dropout, adds);
//   Whole      each block keeps only its input; backward runs the whole block again.
#pragma once

#include <functional>
#include <string_view>

#include "memgrad/autograd/checkpoint_policy.h"
#include "memgrad/core/tensor.h"

namespace mg::nn {

enum class BlockCheckpoint { None, Selective, Whole };

const char* block_checkpoint_name(BlockCheckpoint mode);  // "none", "selective", "whole"
// "none", "selective" or "whole"; anything else is an mg::Error listing them.
BlockCheckpoint parse_block_checkpoint(std::string_view name);

// block(input) as `mode` says: called directly (None), under mg::checkpoint keeping
// `policy`'s op kinds (Selective), or keeping none (Whole). A checkpoint's node holds
// `block` until backward, so it should hold its modules by shared_ptr.
Tensor run_block(BlockCheckpoint mode, const CheckpointPolicy& policy,
                 const std::function<Tensor(const Tensor& input)>& block, const Tensor& input);

}  // namespace mg::nn
