// examples/common/block_checkpoint_flag.cpp — the --checkpoint flag and its phrase.
#include "examples/common/block_checkpoint_flag.h"

#include <memgrad/core/error.h>

namespace examples {

void add_block_checkpoint_flag(FlagHandlers& flags, SwitchHandlers& switches, mg::nn::BlockCheckpoint& mode) {
  switches["--checkpoint"] = [&mode] { mode = mg::nn::BlockCheckpoint::Whole; };
  flags["--checkpoint"] = [&mode](const std::string& value) {
    try {
      mode = mg::nn::parse_block_checkpoint(value);
    } catch (const mg::Error&) {
      throw UsageError("--checkpoint takes none, selective, whole or offload (alone: whole), got '" + value + "'");
    }
  };
}

void check_block_checkpoint(mg::nn::BlockCheckpoint mode, mg::Device device) {
  if (mode == mg::nn::BlockCheckpoint::Offload && device.is_cpu()) {
    throw UsageError("--checkpoint offload moves a GPU's saved activations to host memory; on --device cpu they are "
                     "there already (choose selective or whole to save memory on the CPU)");
  }
}

std::string block_checkpoint_phrase(mg::nn::BlockCheckpoint mode, const mg::CheckpointPolicy& policy) {
  switch (mode) {
    case mg::nn::BlockCheckpoint::None: return "";
    case mg::nn::BlockCheckpoint::Whole: return ", checkpointed block by block";
    case mg::nn::BlockCheckpoint::Selective:
      return ", selectively checkpointed block by block (keeping " + policy.describe() + ")";
    case mg::nn::BlockCheckpoint::Offload: return ", every block's saved activations in host memory";
  }
  return "";
}

}  // namespace examples
