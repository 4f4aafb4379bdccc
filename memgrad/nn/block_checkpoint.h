// nn/block_checkpoint.h — how a model checkpoints its blocks in training (GPTOptions,
// ResNetOptions): not at all, selectively, or whole.
//
// Memory and compute of one step, from most memory to least:
//   None       every block's activations stay saved through the forward;
//   Selective  each block keeps its input and the outputs of the op kinds the policy names
//              (a GPT's matmuls and attention, a ResNet's convolutions); backward runs only
//              the cheap ops again (norms, activations, dropout, adds);
//   Whole      each block keeps only its input; backward runs the whole block again;
//   Offload    every block's activations are saved as with None, but in host memory
//              (autograd/save_on_cpu.h: copied out as the forward saves them, back as
//              backward needs them): a GPU's activation bytes at None's compute, for two
//              transfers of each saved byte. On the CPU the activations are in host memory
//              already, and Offload computes and keeps what None does.
#pragma once

#include <functional>
#include <string_view>

#include "memgrad/autograd/checkpoint_policy.h"
#include "memgrad/core/tensor.h"

namespace mg::nn {

enum class BlockCheckpoint { None, Selective, Whole, Offload };

const char* block_checkpoint_name(BlockCheckpoint mode);  // "none", "selective", "whole", "offload"
// "none", "selective", "whole" or "offload"; anything else is an mg::Error listing them.
BlockCheckpoint parse_block_checkpoint(std::string_view name);

// block(input) as `mode` says: called directly (None), under mg::checkpoint keeping
// `policy`'s op kinds (Selective), or keeping none (Whole), or under a SaveOnCpu guard
// (Offload). A checkpoint's node holds
// `block` until backward, so it should hold its modules by shared_ptr.
Tensor run_block(BlockCheckpoint mode, const CheckpointPolicy& policy,
                 const std::function<Tensor(const Tensor& input)>& block, const Tensor& input);

}  // namespace mg::nn
