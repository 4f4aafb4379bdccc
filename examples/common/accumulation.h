// examples/common/accumulation.h — gradient accumulation: one optimizer step over several
// micro-batches, so that a step sees more samples than fit in memory at once.
//
//   optimizer.zero_grad();
//   for (int64_t i = 0; i < micro_batches; ++i) {
//     mg::Tensor loss = mg::cross_entropy(model(inputs[i]), targets[i]);  // micro-batch mean
//     backward_micro_batch(loss, 1.0 / micro_batches);  // adds its share to .grad, frees its graph
//   }
//   optimizer.step();
//
// Backward adds into the leaves' .grad, so after the last micro-batch .grad holds the
// gradient of the mean loss over all the step's samples (exactly so when the micro-batches
// are the same size). Each micro-batch's backward releases its own graph, so the activation
// peak is one micro-batch's, whatever the count.
//
// accumulate_gradients runs that loop for the examples' training steps (the shared epoch
// loop, training.h, and gpt's step): a step of `batches` batches, each whole or cut into
// micro-batches of at most `micro_batch_rows` samples (--auto-accum, auto_accumulation.h).
// Each micro-batch's loss is weighted by its share of the step, rows / (batch rows x
// batches): 1 / batches for whole batches (what --accum always did), and for a batch cut
// into pieces the share of its samples. A step of A batches of B samples cut into pieces of
// B/S is then, micro-batch for micro-batch and to the byte, the step `--batch B/S --accum
// A*S` takes (the shares are the same doubles: k / (k*S*A) rounds as 1 / (S*A) does).
//
// NOTE: batch norm normalises each micro-batch with that micro-batch's statistics, so a
// model with batch norm (ResNet) is not computing the large batch's forward, and dropout
// draws other masks than one large batch would; a model with neither (the MNIST MLP) is.
#pragma once

#include <cstdint>
#include <functional>

#include <memgrad/core/tensor.h>
#include <memgrad/data/batch.h>
#include <memgrad/distributed/distributed_data_parallel.h>
#include <memgrad/optim/optimizer.h>
#include "examples/common/mixed_precision.h"

namespace examples {

class AutoAccumulation;

// Backpropagates loss * share (just loss when the share is 1, so that a step without
// accumulation computes what it always did).
void backward_micro_batch(const mg::Tensor& loss, double share);

// The share of a micro-batch of `rows` samples, cut from a batch of `batch_rows`, in a step
// of `batches` batches: rows / (batch_rows * batches).
double micro_batch_share(int64_t rows, int64_t batch_rows, int64_t batches);

// Optimizer steps that `batches` micro-batches make at `accum` per step; a shorter last
// step takes the remainder. What a learning-rate schedule counts.
int64_t optimizer_steps(int64_t batches, int64_t accum);

// Piece `piece` of a batch cut along its first dimension into pieces of `piece_rows` (the
// last takes what is left), as a loader of batch `piece_rows` would yield it.
mg::data::Batch batch_piece(const mg::data::Batch& batch, int64_t piece, int64_t piece_rows);
// The pieces of `piece_rows` a batch of `rows` is cut into.
int64_t piece_count(int64_t rows, int64_t piece_rows);

// One micro-batch's forward: its mean loss over its samples, a 0-d tensor (the caller runs
// it under autocast and in the forward phase).
using MicroBatchLoss = std::function<mg::Tensor(const mg::data::Batch& micro_batch)>;

struct AccumulationPlan {
  int64_t batches = 1;           // the step's batches, next_batch() each
  int64_t micro_batch_rows = 0;  // > 0: each batch cut into pieces of this many; 0: whole batches
  // Data-parallel: every micro-batch but the step's last runs under its no_sync, so one
  // all-reduce per step averages the accumulated gradients. nullptr: one process.
  mg::distributed::DistributedDataParallel* ddp = nullptr;
  AutoAccumulation* auto_accum = nullptr;  // told which micro-batch runs (for its message)
};

struct StepLoss {
  mg::Tensor loss;      // the step's loss: the micro-batches' losses weighted by their shares
  int64_t samples = 0;  // in the step's batches
};

// zero_grad, then every micro-batch's forward (`loss_of`, under `precision`'s autocast),
// and backward of its scaled loss times its share. No optimizer step.
StepLoss accumulate_gradients(mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                              const std::function<mg::data::Batch()>& next_batch, const MicroBatchLoss& loss_of,
                              const AccumulationPlan& plan);

}  // namespace examples
