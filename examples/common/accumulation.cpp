// examples/common/accumulation.cpp — a micro-batch's share of an accumulated step, and the
// step's loop over its micro-batches.
#include "examples/common/accumulation.h"

#include <algorithm>
#include <optional>

#include <memgrad/autograd/elementwise.h>
#include <memgrad/core/error.h>
#include <memgrad/memory/context.h>
#include "examples/common/auto_accumulation.h"

namespace examples {

void backward_micro_batch(const mg::Tensor& loss, double share) {
  MG_ASSERT(share > 0 && share <= 1, "a micro-batch's share of its step is in (0, 1], got ", share);
  if (share == 1.0) {
    loss.backward();
    return;
  }
  (loss * share).backward();
}

double micro_batch_share(int64_t rows, int64_t batch_rows, int64_t batches) {
  return static_cast<double>(rows) / static_cast<double>(batch_rows * batches);
}

int64_t optimizer_steps(int64_t batches, int64_t accum) { return (batches + accum - 1) / accum; }

int64_t piece_count(int64_t rows, int64_t piece_rows) { return (rows + piece_rows - 1) / piece_rows; }

mg::data::Batch batch_piece(const mg::data::Batch& batch, int64_t piece, int64_t piece_rows) {
  const int64_t rows = batch.inputs.size(0);
  if (piece_rows >= rows) return batch;
  const int64_t start = piece * piece_rows;
  MG_ASSERT(start < rows, "piece ", piece, " of ", piece_rows, " rows of a batch of ", rows, " is empty");
  const int64_t length = std::min(piece_rows, rows - start);
  return {.inputs = batch.inputs.narrow(0, start, length), .targets = batch.targets.narrow(0, start, length)};
}

StepLoss accumulate_gradients(mg::optim::Optimizer& optimizer, MixedPrecision& precision,
                              const std::function<mg::data::Batch()>& next_batch, const MicroBatchLoss& loss_of,
                              const AccumulationPlan& plan) {
  MG_CHECK(plan.batches >= 1, "accumulate_gradients: a step has at least one batch, got ", plan.batches);
  optimizer.zero_grad();
  StepLoss step;
  int64_t micro_batch = 0;
  for (int64_t batch_index = 0; batch_index < plan.batches; ++batch_index) {
    const mg::data::Batch batch = next_batch();
    const int64_t rows = batch.targets.size(0);
    const int64_t piece_rows = plan.micro_batch_rows > 0 ? std::min(plan.micro_batch_rows, rows) : rows;
    const int64_t pieces = piece_count(rows, piece_rows);
    for (int64_t piece = 0; piece < pieces; ++piece, ++micro_batch) {
      if (plan.auto_accum != nullptr) plan.auto_accum->at_micro_batch(micro_batch);
      const mg::data::Batch micro = batch_piece(batch, piece, piece_rows);
      const bool last = batch_index + 1 == plan.batches && piece + 1 == pieces;
      // NOTE: the forward decides whether its backward all-reduces (as in PyTorch), so the
      // guard spans both.
      std::optional<mg::distributed::DistributedDataParallel::NoSyncGuard> local_only;
      if (plan.ddp != nullptr && !last) local_only.emplace(*plan.ddp);
      mg::Tensor loss;
      {
        AutocastRegion autocast(precision);
        // The loss is part of the forward pass (for a memory::Recorder; free otherwise).
        mg::memory::PhaseScope forward(mg::memory::Phase::Forward);
        loss = loss_of(micro);
      }
      const double share = micro_batch_share(micro.targets.size(0), rows, plan.batches);
      backward_micro_batch(precision.scale(loss), share);
      const mg::Tensor weighted = share == 1.0 ? loss.detach() : loss.detach() * share;
      step.loss = micro_batch == 0 ? weighted : step.loss + weighted;
    }
    step.samples += rows;
  }
  return step;
}

}  // namespace examples
