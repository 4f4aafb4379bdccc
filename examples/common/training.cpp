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
#include "examples/common/accumulation.h"
#include "examples/common/progress.h"

namespace examples {
namespace {

int64_t batches_to_run(const mg::data::DataLoader& loader, int64_t max_batches) {
  return max_batches > 0 ? std::min(max_batches, loader.num_batches()) : loader.num_batches();
}

// An epoch's batches as its steps ask for them: the loader's next, transformed. With
// `keep` (--auto-accum) a step's batches are also kept until the step is done, so that a
// step retried after out of memory takes the same batches again (rewind), not new ones.
// NOTE: the loader moves on only when the next batch is asked for, so that a batch is
// built while the one before is no longer in use, as in a plain loop over the loader.
class EpochBatches {
 public:
  EpochBatches(mg::data::DataLoader& loader, const BatchTransform& transform, bool keep)
      : loaded_(loader.begin()), transform_(transform), keep_(keep) {}

  mg::data::Batch next() {
    if (replayed_ < step_.size()) return step_[replayed_++];
    if (drawn_) ++loaded_;
    MG_ASSERT(loaded_ != std::default_sentinel, "the loader ran out of batches within an epoch");
    drawn_ = true;
    mg::data::Batch batch = transform_ ? transform_(*loaded_) : *loaded_;
    if (keep_) {
      step_.push_back(batch);
      ++replayed_;
    }
    return batch;
  }
  // The step's batches again, from its first.
  void rewind() { replayed_ = 0; }
  // The step is done: its batches may go.
  void step_done() {
    step_.clear();
    replayed_ = 0;
  }

 private:
  mg::data::DataLoader::Iterator loaded_;
  const BatchTransform& transform_;
  bool keep_;
  bool drawn_ = false;
  std::vector<mg::data::Batch> step_;
  size_t replayed_ = 0;
};

}  // namespace

int64_t batches_per_epoch(const mg::data::DataLoader& loader, int64_t batch_size, int64_t limit) {
  return limit > 0 ? std::min(loader.num_batches(), (limit + batch_size - 1) / batch_size) : loader.num_batches();
}

EpochResult train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer, mg::data::DataLoader& loader,
                        mg::Device device, const EpochPlan& plan) {
  MG_CHECK(plan.accum >= 1, "train_epoch: accum must be at least 1, got ", plan.accum);
  MG_CHECK(plan.graph == nullptr || plan.accum == 1, "train_epoch: a step captured as a CUDA graph is one batch; "
           "accum ", plan.accum, " needs eager steps");
  mg::distributed::DistributedDataParallel* ddp = plan.distributed != nullptr ? plan.distributed->ddp() : nullptr;
  MG_CHECK(plan.auto_accum == nullptr || (plan.graph == nullptr && ddp == nullptr),
           "train_epoch: --auto-accum retries eager steps of one process");
  model.train();
  const bool prints = plan.show_progress && (plan.distributed == nullptr || plan.distributed->is_main());
  const int64_t num_batches = batches_to_run(loader, plan.max_batches);
  Progress progress(plan.epoch + 1, plan.epochs, num_batches, device);
  MixedPrecision float32(std::nullopt, device);
  MixedPrecision& precision = plan.precision != nullptr ? *plan.precision : float32;
  AutoAccumulation no_retries(/*enabled=*/false);
  AutoAccumulation& auto_accum = plan.auto_accum != nullptr ? *plan.auto_accum : no_retries;
  const MicroBatchLoss loss_of = [&](const mg::data::Batch& micro_batch) {
    return mg::cross_entropy(model(micro_batch.inputs), micro_batch.targets);
  };
  EpochBatches epoch_batches(loader, plan.transform, auto_accum.enabled());
  mg::Tensor loss_sum = mg::zeros({}, {.dtype = mg::DType::Float64, .device = device});
  EpochResult result;
  int64_t batches = 0;
  while (batches < num_batches) {
    // A step of `accum` batches, or the epoch's remainder.
    AccumulationPlan step_plan{.batches = std::min(plan.accum, num_batches - batches), .ddp = ddp,
                               .auto_accum = plan.auto_accum};
    StepLoss step;
    if (plan.graph != nullptr) {
      const mg::data::Batch batch = epoch_batches.next();
      step.samples = batch.targets.size(0);
      step.loss = plan.graph->run(batch, [&](const mg::data::Batch& on_device) {
        const mg::Tensor loss =
            accumulate_gradients(optimizer, precision, [&] { return on_device; }, loss_of, step_plan).loss;
        precision.step(optimizer);
        return loss;
      });
    } else {
      std::optional<StepStart> step_start;
      if (auto_accum.enabled()) step_start.emplace(model);
      auto_accum.run(device, step_plan.batches, loader.batch_size(), [&](int64_t micro_batch_rows) {
        step_plan.micro_batch_rows = micro_batch_rows;
        step = accumulate_gradients(optimizer, precision, [&] { return epoch_batches.next(); }, loss_of, step_plan);
      }, [&] {
        optimizer.zero_grad();
        step_start->restore();
        epoch_batches.rewind();
      });
      precision.step(optimizer);
    }
    epoch_batches.step_done();
    if (plan.scheduler != nullptr) plan.scheduler->step();
    if (plan.memory_timeline != nullptr) plan.memory_timeline->step_done();
    ++result.steps;

    loss_sum = loss_sum + step.loss * static_cast<double>(step.samples);
    const int64_t batches_before = batches;
    batches += step_plan.batches;
    result.samples += step.samples;
    bool line_due = false;  // at any of the step's batches
    for (int64_t done = batches_before + 1; done <= batches; ++done) line_due = line_due || progress.wants_update(done);
    if (prints && line_due) progress.update(batches, result.samples, loss_sum.item<double>() / result.samples);
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
