// nn/block_checkpoint.cpp — a block run directly or under a whole or selective checkpoint.
#include "memgrad/nn/block_checkpoint.h"

#include <string>

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/save_on_cpu.h"

namespace mg::nn {

const char* block_checkpoint_name(BlockCheckpoint mode) {
  switch (mode) {
    case BlockCheckpoint::None: return "none";
    case BlockCheckpoint::Selective: return "selective";
    case BlockCheckpoint::Whole: return "whole";
    case BlockCheckpoint::Offload: return "offload";
  }
  return "none";
}

BlockCheckpoint parse_block_checkpoint(std::string_view name) {
  for (BlockCheckpoint mode :
       {BlockCheckpoint::None, BlockCheckpoint::Selective, BlockCheckpoint::Whole, BlockCheckpoint::Offload}) {
    if (name == block_checkpoint_name(mode)) return mode;
  }
  MG_CHECK(false, "unknown block checkpointing '", std::string(name), "'. Hint: choose none, selective (keep the "
           "matmul, attention or convolution outputs, recompute the rest), whole (keep only each block's input) or "
           "offload (keep everything, in host memory).");
  return BlockCheckpoint::None;
}

Tensor run_block(BlockCheckpoint mode, const CheckpointPolicy& policy,
                 const std::function<Tensor(const Tensor& input)>& block, const Tensor& input) {
  switch (mode) {
    case BlockCheckpoint::None: return block(input);
    case BlockCheckpoint::Selective: return checkpoint(block, input, policy);
    case BlockCheckpoint::Whole: return checkpoint(block, input);
    case BlockCheckpoint::Offload: {
      const autograd::SaveOnCpu offload;
      return block(input);
    }
  }
  return block(input);
}

}  // namespace mg::nn
