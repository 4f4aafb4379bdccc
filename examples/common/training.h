// examples/common/training.h — the examples' epoch loop and evaluation: one pass of
// zero_grad, forward, cross-entropy, backward, step (and the scheduler's step) with a
// progress line, optionally accumulating several batches per step (accumulation.h) and
// retrying a step that ran out of memory in smaller micro-batches (--auto-accum,
// auto_accumulation.h: the step's batches are kept, cut and run again, not drawn anew),
// and the accuracy over a loader; in a data-parallel run (distributed_run.h) over every
// rank.
//
// NOTE: the loss over the epoch is summed on the device and read only when a progress
// line is printed, and the accuracy's count likewise once per evaluation, so a GPU step
// never waits for the host.
#pragma once

#include <cstdint>
#include <functional>

#include <memgrad/core/device.h>
#include <memgrad/data/dataloader.h>
#include "examples/common/auto_accumulation.h"
#include "examples/common/distributed_run.h"
#include "examples/common/graphed_step.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include <memgrad/nn/module.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/scheduler.h>

namespace examples {

// What a model takes, made from what the loader yields (padding, augmentation, a copy to
// the device). Empty: the batch as it comes.
using BatchTransform = std::function<mg::data::Batch(const mg::data::Batch&)>;

struct EpochPlan {
  int64_t epoch = 0;   // from 0
  int64_t epochs = 1;  // for the progress line
  int64_t max_batches = 0;                    // 0: the whole loader
  // Batches (micro-batches) whose gradients one optimizer step accumulates; the epoch's
  // last step takes the remainder.
  int64_t accum = 1;
  mg::optim::LRScheduler* scheduler = nullptr;  // stepped after every optimizer step
  // --amp: forward under autocast, float16 losses scaled; nullptr: float32.
  MixedPrecision* precision = nullptr;
  BatchTransform transform;
  // --memory-timeline: told of every optimizer step; nullptr: nothing records.
  MemoryTimeline* memory_timeline = nullptr;
  // --cuda-graph: steps captured once and replayed (accum 1 only); nullptr: eager steps.
  GraphedStep* graph = nullptr;
  // --auto-accum: a step that runs out of memory is retried in smaller micro-batches (one
  // process, eager steps); nullptr: out of memory ends the epoch with the error.
  AutoAccumulation* auto_accum = nullptr;
  // Off: no progress lines and no loss read back (a prediction on the simulated device,
  // where no loss is computed; EpochResult::mean_loss is then 0).
  bool show_progress = true;
  // A data-parallel run (`model` is its DDP): every micro-batch but a step's last runs
  // under no_sync (gradients accumulate locally, one all-reduce per step), progress lines
  // come from rank 0 alone, and the result is over every rank. nullptr: one process.
  const DistributedRun* distributed = nullptr;
};

struct EpochResult {
  double mean_loss = 0;  // per sample (over every rank's samples)
  int64_t samples = 0;   // over every rank
  int64_t steps = 0;  // optimizer steps
};

// The batches an epoch runs: all of the loader's, or with limit > 0 enough for about
// `limit` samples in whole batches of batch_size (the examples' --limit).
int64_t batches_per_epoch(const mg::data::DataLoader& loader, int64_t batch_size, int64_t limit);

EpochResult train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer, mg::data::DataLoader& loader,
                        mg::Device device, const EpochPlan& plan);

// The fraction of the loader's samples (its first max_batches batches unless 0) whose
// most likely class is the target, in eval mode without autograd (under autocast when
// `precision` has a 16-bit dtype, as the model trained). With `distributed`, each rank
// evaluates its loader (its shard: DistributedRun::evaluation_sampler) and the counts are
// summed over the ranks; pass the model itself, not its DDP.
double evaluate(mg::nn::Module& model, mg::data::DataLoader& loader, mg::Device device,
                const BatchTransform& transform = {}, int64_t max_batches = 0,
                const MixedPrecision* precision = nullptr, const DistributedRun* distributed = nullptr);

}  // namespace examples
