// examples/common/auto_accumulation.h — --auto-accum and --memory-cap: a training step that
// runs out of memory is retried with each batch cut into micro-batches half as large
// (rounded up; the last takes what is left), at the same effective batch and with the same
// mathematics as --accum (accumulation.h): a step of A batches of B samples cut into pieces
// of B/S is the step `--batch B/S --accum A*S` takes, micro-batch for micro-batch. The run
// says so:
//
//   out of memory at micro-batch 1 of 1; going on with 2 micro-batches of 4
//
// The step must leave no trace when it throws: the caller's `restart` puts back what the
// failed attempt changed (gradients to none, the generators it drew from, the model's
// buffers: StepStart), and gives the step the same batches again (kept, not drawn anew).
// The failed attempt's tensors are gone by then (out of scope), and the allocator's cache
// is emptied, so the retry starts from what the step's inputs and the model hold. A
// micro-batch of one sample that still does not fit ends the run with an mg::Error saying
// so. Later steps keep the smaller micro-batches.
//
// NOTE: a model with batch norm normalises each micro-batch with its own statistics, so
// after a split it computes what the --accum run computes, not what the unsplit step did.
//
// --memory-cap BYTES caps what memgrad may reserve on the run's device
// (memory/memory_cap.h), so that out of memory can be met, and shown, on any machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/core/random.h>
#include <memgrad/core/tensor.h>
#include <memgrad/nn/module.h>
#include "examples/common/cli.h"

namespace examples {

struct OutOfMemoryFlags {
  std::optional<int64_t> memory_cap;  // --memory-cap BYTES
  bool auto_accum = false;            // --auto-accum
};

// Adds --memory-cap and --auto-accum to a program's flags.
void add_out_of_memory_flags(FlagHandlers& flags, SwitchHandlers& switches, OutOfMemoryFlags& values);
// `flags` and the two, for a mode's list of flags it ignores (a prediction, a benchmark).
std::vector<std::string> with_out_of_memory_flags(std::vector<std::string> flags);
// Their lines for a program's --help.
extern const char* const kOutOfMemoryUsage;
// Throws UsageError where --auto-accum cannot work: data-parallel (every rank would have to
// split its batches alike, in the same step) and --cuda-graph (a captured step replays the
// micro-batches it was captured with).
void check_out_of_memory_flags(const OutOfMemoryFlags& flags, bool distributed, bool cuda_graph);
// Applies --memory-cap to `device` (nothing without it).
void apply_memory_cap(const OutOfMemoryFlags& flags, mg::Device device);

// What a training step changes beside the gradients, taken before it so that a retry starts
// where the failed attempt did: the default generator's state (dropout masks) and copies
// of the model's buffers (batch norm's running statistics, which every training forward
// updates). Taken only under --auto-accum: copying the buffers costs a copy a step.
class StepStart {
 public:
  explicit StepStart(const mg::nn::Module& model);
  // Puts the generator and the buffers back as they were.
  void restore() const;

 private:
  mg::PhiloxState dropout_;
  std::vector<mg::Tensor> buffers_;  // the model's own
  std::vector<mg::Tensor> saved_;    // their values before the step
};

class AutoAccumulation {
 public:
  explicit AutoAccumulation(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  // Tells which micro-batch of the step runs now (for the message).
  void at_micro_batch(int64_t index) { micro_batch_ = index; }

  // Runs `step(micro_batch_rows)`, a step of `batches` batches of `rows` samples each cut
  // into micro-batches of micro_batch_rows (`rows` until a step ran out of memory), until it
  // gets through: after an out-of-memory error (only when enabled; otherwise it is
  // rethrown) `restart()`, the allocator's cache on `device` emptied, micro-batches half as
  // large, a line on stdout, and again.
  void run(mg::Device device, int64_t batches, int64_t rows, const std::function<void(int64_t micro_batch_rows)>& step,
           const std::function<void()>& restart);

 private:
  bool enabled_;
  int64_t micro_batch_rows_ = 0;  // 0: whole batches
  int64_t micro_batch_ = 0;
};

}  // namespace examples
