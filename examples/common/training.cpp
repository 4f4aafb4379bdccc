// examples/common/training.cpp — the shared epoch loop and evaluation.
#include "examples/common/training.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/autograd/loss.h>
#include <memgrad/autograd/reduce.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/memory/context.h>
#include "examples/common/accumulation.h"
#include "examples/common/progress.h"

namespace examples {
namespace {

int64_t batches_to_run(const mg::data::DataLoader& loader, int64_t max_batches) {
  return max_batches > 0 ? std::min(max_batches, loader.num_batches()) : loader.num_batches();
}

}  // namespace

int64_t batches_per_epoch(const mg::data::DataLoader& loader, int64_t batch_size, int64_t limit) {
  return limit > 0 ? std::min(loader.num_batches(), (limit + batch_size - 1) / batch_size) : loader.num_batches();
}

EpochResult train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer, mg::data::DataLoader& loader,
                        mg::Device device, const EpochPlan& plan) {
  MG_CHECK(plan.accum >= 1, "train_epoch: accum must be at least 1, got ", plan.accum);
  MG_CHECK(plan.graph == nullptr || plan.accum == 1, "train_epoch: a step captured as a CUDA graph is one batch; "
           "accum ", plan.accum, " needs eager steps");
  model.train();
  const bool prints = plan.show_progress && (plan.distributed == nullptr || plan.distributed->is_main());
  mg::distributed::DistributedDataParallel* ddp = plan.distributed != nullptr ? plan.distributed->ddp() : nullptr;
  const int64_t num_batches = batches_to_run(loader, plan.max_batches);
  Progress progress(plan.epoch + 1, plan.epochs, num_batches, device);
  MixedPrecision float32(std::nullopt, device);
  MixedPrecision& precision = plan.precision != nullptr ? *plan.precision : float32;
  mg::Tensor loss_sum = mg::zeros({}, {.dtype = mg::DType::Float64, .device = device});
  EpochResult result;
  int64_t batches = 0;
  for (const mg::data::Batch& loaded : loader) {
    if (batches == num_batches) break;
    // Micro-batch `position` of a step of `step_batches` (accum, or the epoch's remainder).
    const int64_t position = batches % plan.accum;
    const int64_t step_batches = std::min(plan.accum, num_batches - (batches - position));
    const mg::data::Batch batch = plan.transform ? plan.transform(loaded) : loaded;
    // Micro-batch `position` of the step: its forward and backward, and the optimizer's
    // step after the last one; the loss of the batch.
    auto micro_batch = [&](const mg::data::Batch& on) {
      if (position == 0) optimizer.zero_grad();
      // NOTE: the forward decides whether its backward all-reduces (as in PyTorch), so the
      // guard spans both.
      std::optional<mg::distributed::DistributedDataParallel::NoSyncGuard> local_only;
      if (ddp != nullptr && position + 1 < step_batches) local_only.emplace(*ddp);
      mg::Tensor batch_loss;
      {
        AutocastRegion autocast(precision);
        // The loss is part of the forward pass (for a memory::Recorder; free otherwise).
        mg::memory::PhaseScope forward(mg::memory::Phase::Forward);
        batch_loss = mg::cross_entropy(model(on.inputs), on.targets);
      }
      backward_micro_batch(precision.scale(batch_loss), step_batches);
      if (position + 1 == step_batches) precision.step(optimizer);
      return batch_loss;
    };
    const mg::Tensor loss = plan.graph != nullptr ? plan.graph->run(batch, micro_batch) : micro_batch(batch);
    if (position + 1 == step_batches) {
      if (plan.scheduler != nullptr) plan.scheduler->step();
      if (plan.memory_timeline != nullptr) plan.memory_timeline->step_done();
      ++result.steps;
    }

    const int64_t batch_size = batch.targets.size(0);
    loss_sum = loss_sum + loss.detach() * static_cast<double>(batch_size);
    ++batches;
    result.samples += batch_size;
    if (prints && progress.wants_update(batches)) {
      progress.update(batches, result.samples, loss_sum.item<double>() / result.samples);
    }
  }
  if (!plan.show_progress) return result;
  if (prints) progress.finish();
  std::vector<double> totals = {loss_sum.item<double>(), static_cast<double>(result.samples)};
  if (plan.distributed != nullptr) totals = plan.distributed->sum(totals);
  result.samples = static_cast<int64_t>(totals[1]);
  result.mean_loss = totals[0] / totals[1];
  return result;
}

double evaluate(mg::nn::Module& model, mg::data::DataLoader& loader, mg::Device device,
                const BatchTransform& transform, int64_t max_batches, const MixedPrecision* precision,
                const DistributedRun* distributed) {
  mg::NoGradGuard no_grad;
  const MixedPrecision float32(std::nullopt, device);
  const AutocastRegion autocast(precision != nullptr ? *precision : float32);
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
  std::vector<double> counts = {static_cast<double>(correct.item<int64_t>()), static_cast<double>(samples)};
  if (distributed != nullptr) counts = distributed->sum(counts);
  return counts[0] / counts[1];
}

}  // namespace examples
