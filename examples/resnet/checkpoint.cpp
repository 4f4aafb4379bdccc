// examples/resnet/checkpoint.cpp — the resnet run's fields in its checkpoint file.
#include "examples/resnet/checkpoint.h"

#include "examples/common/run_checkpoint.h"

namespace resnet {

void save_checkpoint(const std::string& path, const std::string& model_name, const mg::nn::Module& model,
                     const mg::optim::OptimizerStateDict& optimizer_state, const examples::MixedPrecision& precision,
                     const mg::optim::LRScheduler& scheduler, const RunProgress& progress) {
  examples::save_run_checkpoint(path, model_name, precision,
                                {.model = &model,
                                 .optimizer_state = &optimizer_state,
                                 .scheduler = &scheduler,
                                 .step = progress.scheduler_steps,
                                 .epoch = progress.epochs_done,
                                 .tensors = {
                                     {"total_steps", examples::run_integer(progress.total_steps)},
                                     {"best_accuracy", examples::run_real(progress.best_accuracy)},
                                     {"best_epoch", examples::run_integer(progress.best_epoch)},
                                     {"seconds", examples::run_real(progress.seconds)},
                                     {"seconds_to_best", examples::run_real(progress.seconds_to_best)},
                                     {"test_accuracy", examples::run_reals(progress.test_accuracy)},
                                     {"seconds_per_epoch", examples::run_reals(progress.seconds_per_epoch)},
                                 }});
}

RunProgress load_checkpoint(const std::string& path, const std::string& model_name, mg::nn::Module& model,
                            mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                            mg::optim::LRScheduler& scheduler, const examples::DistributedRun& distributed) {
  RunProgress progress;
  examples::load_run_checkpoint(
      path, model_name, {.model = &model, .scheduler = &scheduler}, optimizer, precision, distributed,
      [&](const examples::RunFields& fields) {
        progress.epochs_done = fields.epoch();
        progress.scheduler_steps = fields.step();
        progress.total_steps = fields.integer("total_steps");
        progress.best_accuracy = fields.real("best_accuracy");
        progress.best_epoch = fields.integer("best_epoch");
        progress.seconds = fields.real("seconds");
        progress.seconds_to_best = fields.real("seconds_to_best");
        progress.test_accuracy = fields.reals("test_accuracy");
        progress.seconds_per_epoch = fields.reals("seconds_per_epoch");
      });
  return progress;
}

}  // namespace resnet
