// examples/common/training.cpp — the shared epoch loop and evaluation.
#include "examples/common/training.h"

#include <algorithm>

#include "autograd/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/loss.h"
#include "autograd/reduce.h"
#include "core/factory.h"
#include "examples/common/progress.h"

namespace examples {
namespace {

int64_t batches_to_run(const mg::data::DataLoader& loader, int64_t max_batches) {
  return max_batches > 0 ? std::min(max_batches, loader.num_batches()) : loader.num_batches();
}

}  // namespace

EpochResult train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer, mg::data::DataLoader& loader,
                        mg::Device device, const EpochPlan& plan) {
  model.train();
  const int64_t num_batches = batches_to_run(loader, plan.max_batches);
  Progress progress(plan.epoch + 1, plan.epochs, num_batches);
  mg::Tensor loss_sum = mg::zeros({}, {.dtype = mg::DType::Float64, .device = device});
  EpochResult result;
  for (const mg::data::Batch& loaded : loader) {
    if (result.steps == num_batches) break;
    const mg::data::Batch batch = plan.transform ? plan.transform(loaded) : loaded;
    optimizer.zero_grad();
    mg::Tensor loss = mg::cross_entropy(model(batch.inputs), batch.targets);
    loss.backward();
    optimizer.step();
    if (plan.scheduler != nullptr) plan.scheduler->step();

    const int64_t batch_size = batch.targets.size(0);
    loss_sum = loss_sum + loss.detach() * static_cast<double>(batch_size);
    ++result.steps;
    result.samples += batch_size;
    if (progress.wants_update(result.steps)) {
      progress.update(result.steps, result.samples, loss_sum.item<double>() / result.samples);
    }
  }
  progress.finish();
  result.mean_loss = loss_sum.item<double>() / result.samples;
  return result;
}

double evaluate(mg::nn::Module& model, mg::data::DataLoader& loader, mg::Device device,
                const BatchTransform& transform, int64_t max_batches) {
  mg::NoGradGuard no_grad;
  model.eval();
  const int64_t num_batches = batches_to_run(loader, max_batches);
  mg::Tensor correct = mg::zeros({}, {.dtype = mg::DType::Int64, .device = device});
  int64_t samples = 0, batches = 0;
  for (const mg::data::Batch& loaded : loader) {
    if (batches++ == num_batches) break;
    const mg::data::Batch batch = transform ? transform(loaded) : loaded;
    mg::Tensor predictions = mg::argmax(model(batch.inputs), 1);  // (B)
    correct = correct + mg::sum(mg::eq(predictions, batch.targets));
    samples += batch.targets.size(0);
  }
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(samples);
}

}  // namespace examples
