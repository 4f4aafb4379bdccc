// nn/block_checkpoint.cpp — a block run directly or under a whole or selective checkpoint.
#include "memgrad/nn/block_checkpoint.h"

#include <string>

#include "memgrad/autograd/checkpoint.h"

namespace mg::nn {

const char* block_checkpoint_name(BlockCheckpoint mode) {
  switch (mode) {
    case BlockCheckpoint::None: return "none";
    case BlockCheckpoint::Selective: return "selective";
    case BlockCheckpoint::Whole: return "whole";
  }
  return "none";
}

BlockCheckpoint parse_block_checkpoint(std::string_view name) {
  for (BlockCheckpoint mode : {BlockCheckpoint::None, BlockCheckpoint::Selective, BlockCheckpoint::Whole}) {
    if (name == block_checkpoint_name(mode)) return mode;
  }
  MG_CHECK(false, "unknown block checkpointing '", std::string(name), "'. Hint: choose none, selective (keep the "
           "matmul, attention or convolution outputs, recompute the rest) or whole (keep only each block's input).");
  return BlockCheckpoint::None;
}

Tensor run_block(BlockCheckpoint mode, const CheckpointPolicy& policy,
                 const std::function<Tensor(const Tensor& input)>& block, const Tensor& input) {
  switch (mode) {
    case BlockCheckpoint::None: return block(input);
    case BlockCheckpoint::Selective: return checkpoint(block, input, policy);
    case BlockCheckpoint::Whole: return checkpoint(block, input);
  }
  return block(input);
}

}  // namespace mg::nn
