// examples/resnet/optimizer.h — the resnet program's optimizer, for training, --bench and
// --predict-memory alike: SGD (Nesterov, momentum 0.9, weight decay 5e-4) by default, or
// with --optimizer adamw AdamW (weight decay 0.05 on the convolution and linear weights,
// none on biases and batch norm's parameters), whose state --optimizer-state places
// (examples/common/optimizer_state.h). --zero makes either ZeRO-1's.
#pragma once

#include <memory>
#include <string>

#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include "examples/common/distributed_run.h"
#include "examples/resnet/args.h"

namespace resnet {

// `model` is the network itself (not its DDP wrapper, which holds the same parameters).
std::unique_ptr<mg::optim::Optimizer> make_optimizer(const examples::DistributedRun& run, const mg::nn::Module& model,
                                                     const Args& args);
// "sgd" or "adamw", for summaries.
std::string optimizer_name(const Args& args);
// "SGD (Nesterov, momentum 0.9, weight decay 5e-4)", "8-bit AdamW (weight decay 0.05)", ...
std::string describe_optimizer(const Args& args);
// The OPTIMIZER_STATE line of the memory report's legend.
std::string optimizer_state_meaning(const Args& args);

}  // namespace resnet
