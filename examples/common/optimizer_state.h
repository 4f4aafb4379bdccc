// examples/common/optimizer_state.h — the examples' --optimizer-state: where AdamW keeps its
// moments. One flag for the three levers memgrad offers on optimizer state, so that the
// gpt and resnet programs (and the memory planner) name them alike:
//
//   device           optim::AdamW: float32 moments on the parameters' device (8 bytes per
//                    float32 parameter element)
//   8bit             optim::AdamW8bit: block-wise quantised moments on the device (about 2)
//   offload          optim::OffloadedAdamW: moments and float32 master weights in pinned host
//                    memory, updated on the host's cores (0 on the device, 12 on the host);
//                    the step ends before the next forward, as PyTorch's
//   offload-delayed  the same with ZeRO-Offload's one-step delayed update: the host update
//                    overlaps the next forward and backward, every gradient one update stale
//
// Each wraps the same parameter groups and options (lr, betas, eps, weight decay), so a
// schedule, clipping, a GradScaler and checkpoints work as with AdamW. A checkpoint holds
// the state of the optimizer that wrote it: resume with the same --optimizer-state.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <memgrad/optim/adam.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/param_groups.h>
#include "examples/common/distributed_run.h"

namespace examples {

enum class OptimizerState { Device, EightBit, Offload, OffloadDelayed };

// "device", "8bit", "offload" or "offload-delayed"; anything else is a UsageError.
OptimizerState parse_optimizer_state(const std::string& text);
std::string optimizer_state_name(OptimizerState state);
// The usage lines of --optimizer-state, for a program's --help.
std::string optimizer_state_usage();
// The flags that do not go with a state: ZeRO-1 shards AdamW's device state (nothing to
// shard once it is 8-bit or on the host), and --cuda-graph replays a step without the
// host, which the offloaded update needs. Throws UsageError.
void check_optimizer_state_flags(OptimizerState state, bool zero, bool cuda_graph);

// "AdamW", "8-bit AdamW", "host-offloaded AdamW", ...: for a run's first lines.
std::string describe_adamw(OptimizerState state);

// AdamW over `groups` with its state where `state` says; with `zero` (state Device only,
// check_optimizer_state_flags), ZeRO-1's AdamW over `run`'s ranks.
std::unique_ptr<mg::optim::Optimizer> make_adamw(const DistributedRun& run,
                                                 std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>> groups,
                                                 bool zero, OptimizerState state);

// Before evaluating or saving: an offloaded optimizer in delayed mode writes the update in
// flight into the model; every other optimizer has nothing to finish.
void finish_optimizer_step(mg::optim::Optimizer& optimizer);

}  // namespace examples
