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
      throw UsageError("--checkpoint takes none, selective or whole (alone: whole), got '" + value + "'");
    }
  };
}

std::string block_checkpoint_phrase(mg::nn::BlockCheckpoint mode, const mg::CheckpointPolicy& policy) {
  switch (mode) {
    case mg::nn::BlockCheckpoint::None: return "";
    case mg::nn::BlockCheckpoint::Whole: return ", checkpointed block by block";
    case mg::nn::BlockCheckpoint::Selective:
      return ", selectively checkpointed block by block (keeping " + policy.describe() + ")";
  }
  return "";
}

}  // namespace examples
