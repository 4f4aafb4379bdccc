// examples/common/optimizer_state.cpp — --optimizer-state: parsing, checks, and the AdamW it
// names.
#include "examples/common/optimizer_state.h"

#include <utility>

#include <memgrad/optim/adam_8bit.h>
#include <memgrad/optim/offloaded_adam.h>
#include "examples/common/cli.h"

namespace examples {

OptimizerState parse_optimizer_state(const std::string& text) {
  if (text == "device") return OptimizerState::Device;
  if (text == "8bit") return OptimizerState::EightBit;
  if (text == "offload") return OptimizerState::Offload;
  if (text == "offload-delayed") return OptimizerState::OffloadDelayed;
  throw UsageError("--optimizer-state must be device, 8bit, offload or offload-delayed, got '" + text + "'");
}

std::string optimizer_state_name(OptimizerState state) {
  switch (state) {
    case OptimizerState::Device: return "device";
    case OptimizerState::EightBit: return "8bit";
    case OptimizerState::Offload: return "offload";
    case OptimizerState::OffloadDelayed: return "offload-delayed";
  }
  return "device";
}

std::string optimizer_state_usage() {
  return R"(  --optimizer-state S    where AdamW keeps its moments (default device):
                           device: float32 on the device (8 bytes per parameter)
                           8bit: block-wise 8-bit on the device (about 2 bytes)
                           offload: float32 moments and master weights in pinned host
                             memory, updated on the host's cores (0 on the device)
                           offload-delayed: offload whose host update overlaps the next
                             forward and backward (every gradient one update stale)
)";
}

void check_optimizer_state_flags(OptimizerState state, bool zero, bool cuda_graph) {
  if (state == OptimizerState::Device) return;
  const std::string flag = "--optimizer-state " + optimizer_state_name(state);
  if (zero) {
    throw UsageError(flag + " does not go with --zero: ZeRO-1 shards AdamW's float32 device state; "
                     "use one lever or the other");
  }
  if (cuda_graph && state != OptimizerState::EightBit) {
    throw UsageError(flag + " does not go with --cuda-graph: the graph replays the step without the host, "
                     "which runs the offloaded update");
  }
}

std::string describe_adamw(OptimizerState state) {
  switch (state) {
    case OptimizerState::Device: return "AdamW";
    case OptimizerState::EightBit: return "8-bit AdamW";
    case OptimizerState::Offload: return "host-offloaded AdamW";
    case OptimizerState::OffloadDelayed: return "host-offloaded AdamW with delayed update";
  }
  return "AdamW";
}

std::unique_ptr<mg::optim::Optimizer> make_adamw(const DistributedRun& run,
                                                 std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>> groups,
                                                 bool zero, OptimizerState state) {
  switch (state) {
    case OptimizerState::Device: return run.make_optimizer<mg::optim::AdamW>(std::move(groups), zero);
    case OptimizerState::EightBit: {
      std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamW8bitOptions>> eight_bit;
      for (auto& [params, options] : groups) {
        eight_bit.push_back({std::move(params), {.lr = options.lr,
                                                 .beta1 = options.beta1,
                                                 .beta2 = options.beta2,
                                                 .eps = options.eps,
                                                 .weight_decay = options.weight_decay}});
      }
      return std::make_unique<mg::optim::AdamW8bit>(std::move(eight_bit));
    }
    case OptimizerState::Offload:
    case OptimizerState::OffloadDelayed:
      return std::make_unique<mg::optim::OffloadedAdamW>(
          std::move(groups), mg::optim::OffloadOptions{.delayed_update = state == OptimizerState::OffloadDelayed});
  }
  return nullptr;
}

void finish_optimizer_step(mg::optim::Optimizer& optimizer) {
  if (auto* offloaded = dynamic_cast<mg::optim::OffloadedAdam*>(&optimizer)) offloaded->finish_pending_update();
}

}  // namespace examples
