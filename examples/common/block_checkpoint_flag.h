// examples/common/block_checkpoint_flag.h — --checkpoint for the programs whose models
// checkpoint block by block (gpt, resnet; nn/block_checkpoint.h):
//
//   --checkpoint            whole blocks (what the flag meant before 2026-12-07)
//   --checkpoint whole      the same
//   --checkpoint selective  keep the expensive ops' outputs (the model's default policy:
//                           a GPT's matmuls and attention, a ResNet's convolutions) and
//                           recompute only the cheap ops between them
//   --checkpoint offload    keep everything, in host memory (copied back in backward): for
//                           a GPU; on --device cpu it is refused (the activations are
//                           in host memory already)
//   --checkpoint none       no checkpointing (the default)
#pragma once

#include <string>

#include <memgrad/core/device.h>
#include <memgrad/nn/block_checkpoint.h>
#include "examples/common/cli.h"

namespace examples {

// Adds --checkpoint [none|selective|whole|offload], which sets `mode`; a bad word is a
// UsageError.
void add_block_checkpoint_flag(FlagHandlers& flags, SwitchHandlers& switches, mg::nn::BlockCheckpoint& mode);

// Throws UsageError for --checkpoint offload on a CPU device, where it would change nothing.
void check_block_checkpoint(mg::nn::BlockCheckpoint mode, mg::Device device);

// How a run's one-line description names the mode: "", ", checkpointed block by block" or
// ", selectively checkpointed block by block (keeping matmul, attention)".
std::string block_checkpoint_phrase(mg::nn::BlockCheckpoint mode, const mg::CheckpointPolicy& policy);

}  // namespace examples
