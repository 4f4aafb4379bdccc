// examples/gpt/training.h — one optimizer step of a language model and the loss estimate,
// as the gpt program runs them for training and for --predict-memory alike:
//
//   step:      zero_grad; per micro-batch: a batch of random windows (windows.h), forward under autocast, the
//              cross-entropy of every position's next byte, backward of loss / accum;
//              unscale (fp16), clip the gradients' norm to 1, optimizer step (skipped on
//              the device after an fp16 overflow), scheduler step
//   estimate:  the mean loss of `iters` batches of one split, in eval mode without
//              autograd, from a generator seeded afresh each time: the same windows at
//              every estimate, so that a lower estimate means a better model, not
//              luckier windows
//
// Data-parallel (examples/common/distributed_run.h): the step's losses go through the
// run's DDP (ddp->call around GPT::loss), every micro-batch but the last under no_sync,
// so one all-reduce per step averages the accumulated gradients; each rank draws its own
// windows (its own generator). The estimate's batches are shared out among the ranks
// (rank r computes batches r, r + ranks, ... of the same windows) and summed over them:
// every rank gets the same estimate as one process would.
//
// Nothing here reads a value back to the host; the caller decides when to (the loss
// tensors stay on the device).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/core/random.h>
#include <memgrad/core/tensor.h>
#include "examples/common/auto_accumulation.h"
#include "examples/common/distributed_run.h"
#include "examples/common/graphed_step.h"
#include "examples/common/mixed_precision.h"
#include <memgrad/data/batch.h>
#include <memgrad/data/dataloader.h>
#include <memgrad/nn/gpt.h>
#include <memgrad/optim/adam.h>
#include <memgrad/optim/optimizer.h>
#include <memgrad/optim/scheduler.h>

namespace gpt {

struct StepPlan {
  int64_t batch_size = 1;  // windows per micro-batch
  int64_t accum = 1;       // batches per step
  // > 0 (--auto-accum after out of memory): each batch cut into micro-batches of this many
  // windows (examples/common/accumulation.h); 0: whole batches.
  int64_t micro_batch_rows = 0;
  double clip_norm = 1.0;
  // Data-parallel: the model's DDP (losses through ddp->call, no_sync but for the last
  // micro-batch); nullptr: one process.
  mg::distributed::DistributedDataParallel* ddp = nullptr;
};

// AdamW as nanoGPT's character-level model: betas 0.9 / 0.99, weight decay 0.1 on the
// matrices (optim/param_groups.h), none on biases and LayerNorms; training and the bench
// step alike.
mg::optim::AdamW make_optimizer(const mg::nn::GPT& model, double lr);
// Its parameter groups and options (for ZeRO-1, which builds the AdamW of its shards).
std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>> adamw_groups(const mg::nn::GPT& model, double lr);

// The gradients of one optimizer step over plan.accum batches, each next_batch()'s ((B, T)
// int64 inputs and targets on the device), whole or in micro-batches of
// plan.micro_batch_rows (`auto_accum` told of each), from none
// (examples::accumulate_gradients). Returns the step's mean loss (its micro-batches'
// losses weighted by their shares) as a 0-d float32 tensor on the device.
mg::Tensor accumulate_gradients(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                                const std::function<mg::data::Batch()>& next_batch, const StepPlan& plan,
                                examples::AutoAccumulation* auto_accum = nullptr);

// accumulate_gradients, then clipping and the optimizer's step: no scheduler step. Returns
// the step's mean loss. The bench times this on one fixed batch.
mg::Tensor optimizer_step(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                          const std::function<mg::data::Batch()>& next_batch, const StepPlan& plan);

// Optimizer step `step` on epoch `step` of `windows` (a loader made with
// random_window_batches(..., plan.batch_size, plan.accum, device): an epoch a step), then
// the scheduler's step (when given); returns the step's mean loss as optimizer_step does.
// With `graph` (--cuda-graph, accum 1), the windows are gathered and copied to the device
// outside the step, and the step itself runs through the graph (captured on the first
// call, replayed after). With `auto_accum` (--auto-accum; not with a graph), a step whose
// gradients ran out of memory is drawn again and retried in smaller micro-batches (see
// examples/common/auto_accumulation.h); `restart` puts back the generators it drew from.
mg::Tensor train_step(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                      mg::optim::LRScheduler* scheduler, mg::data::DataLoader& windows, int64_t step,
                      const StepPlan& plan, examples::GraphedStep* graph = nullptr,
                      examples::AutoAccumulation* auto_accum = nullptr, const std::function<void()>& restart = {});

// The mean loss of `iters` batches of `batch_size` windows of `bytes`, drawn from a
// generator seeded with `seed`, as a 0-d float64 tensor on the device; leaves the model
// in training mode. With `distributed`, each rank computes its share of the batches and
// every rank returns the mean over all of them (a collective).
mg::Tensor estimate_loss(mg::nn::GPT& model, const examples::MixedPrecision& precision,
                         const std::vector<uint8_t>& bytes, int64_t iters, int64_t batch_size, uint64_t seed,
                         const examples::DistributedRun* distributed = nullptr);

}  // namespace gpt
