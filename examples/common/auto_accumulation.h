// examples/common/auto_accumulation.h — --auto-accum and --memory-cap: a training step that
// runs out of memory is retried with each batch split into micro-batches half as large
// (rounded up; the last takes what is left), at the same effective batch and with the same mathematics as --accum
// (accumulation.h): a step of A batches of B samples split into S pieces each is the step
// `--batch B/S --accum A*S` takes, micro-batch for micro-batch. The run says so:
//
//   out of memory at micro-batch 1 of 1; going on with 2 micro-batches of 4
//
// The step must leave no trace when it throws: the caller's `restart` puts back what the
// failed attempt changed (gradients to none, the generators it drew from). The failed
// attempt's tensors are gone by then (out of scope), and the allocator's cache is
// emptied, so the retry starts from what the step's inputs and the model hold. A micro-batch of
// one sample that still does not fit ends the run with an mg::Error saying so.
//
// --memory-cap BYTES caps what memgrad may reserve on the run's device
// (memory/memory_cap.h), so that out of memory can be met, and shown, on any machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/data/batch.h>
#include "examples/common/cli.h"

namespace examples {

struct OutOfMemoryFlags {
  std::optional<int64_t> memory_cap;  // --memory-cap BYTES
  bool auto_accum = false;            // --auto-accum
};

// Adds --memory-cap and --auto-accum to a program's flags.
void add_out_of_memory_flags(FlagHandlers& flags, SwitchHandlers& switches, OutOfMemoryFlags& values);
// Their lines for a program's --help.
extern const char* const kOutOfMemoryUsage;
// Applies --memory-cap to `device` (nothing without it).
void apply_memory_cap(const OutOfMemoryFlags& flags, mg::Device device);

// Piece `piece` of `pieces` of a batch along its first dimension, as a loader of batch
// ceil(rows / pieces) would yield it (the last piece takes what is left).
mg::data::Batch batch_piece(const mg::data::Batch& batch, int64_t piece, int64_t pieces);

class AutoAccumulation {
 public:
  explicit AutoAccumulation(bool enabled) : enabled_(enabled) {}

  // Pieces each batch is split into (1 until a step ran out of memory).
  int64_t splits() const { return splits_; }
  // Tells which micro-batch of the step runs now (for the message).
  void at_micro_batch(int64_t index) { micro_batch_ = index; }

  // Runs `step(splits)`, a step of `batches` batches of `rows` samples each, until it gets
  // through: after an out-of-memory error (only when enabled; otherwise it is rethrown)
  // `restart()`, the allocator's cache on `device` emptied, pieces half as large, a line
  // on stdout, and again.
  void run(mg::Device device, int64_t batches, int64_t rows, const std::function<void(int64_t splits)>& step,
           const std::function<void()>& restart);

 private:
  bool enabled_;
  int64_t splits_ = 1;
  int64_t micro_batch_ = 0;
};

}  // namespace examples
