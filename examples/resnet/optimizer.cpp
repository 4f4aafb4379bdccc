// examples/resnet/optimizer.cpp — SGD or AdamW, as the command line asks.
#include "examples/resnet/optimizer.h"

#include <memgrad/optim/adam.h>
#include <memgrad/optim/param_groups.h>
#include <memgrad/optim/sgd.h>
#include "examples/common/optimizer_state.h"

namespace resnet {

std::unique_ptr<mg::optim::Optimizer> make_optimizer(const examples::DistributedRun& run, const mg::nn::Module& model,
                                                     const Args& args) {
  if (args.optimizer == Optimizer::AdamW) {
    return examples::make_adamw(
        run, mg::optim::weight_decay_groups(model, mg::optim::AdamWOptions{.lr = args.lr, .weight_decay = 0.05}),
        args.zero, args.optimizer_state);
  }
  return run.make_optimizer<mg::optim::SGD>(
      model.parameters(), mg::optim::SGDOptions{.lr = args.lr, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true},
      args.zero);
}

std::string optimizer_name(const Args& args) { return args.optimizer == Optimizer::AdamW ? "adamw" : "sgd"; }

std::string describe_optimizer(const Args& args) {
  if (args.optimizer == Optimizer::AdamW) return examples::describe_adamw(args.optimizer_state) + " (weight decay 0.05)";
  return "SGD (Nesterov, momentum 0.9, weight decay 5e-4)";
}

std::string optimizer_state_meaning(const Args& args) {
  const std::string shard = args.zero ? " (this rank's shard)" : "";
  if (args.optimizer == Optimizer::Sgd) return "SGD's momentum buffers" + shard;
  if (args.optimizer_state == examples::OptimizerState::EightBit) return "AdamW's 8-bit moments, absmaxes and step counters";
  return "AdamW's moments and step counters" + shard;
}

}  // namespace resnet
