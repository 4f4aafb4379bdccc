// examples/gpt/summary.h — what the gpt program writes with --summary-json: the run's
// set-up (shared with a --predict-memory summary), its losses and their history, its speed,
// and memory by category (the object every example writes).
#pragma once

#include <cstdint>
#include <vector>

#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include "examples/gpt/args.h"
#include "examples/gpt/checkpoint.h"
#include "examples/gpt/data.h"

namespace gpt {

// What this invocation measured, beside the run's state (which spans resumed runs).
struct SessionFacts {
  int64_t parameters = 0;
  double flops_per_token = 0;  // GPT::training_flops_per_token
  int64_t ranks = 1;         // data-parallel ranks (1: one process)
  int64_t resumed_from = 0;  // steps done before this invocation
  double train_seconds = 0;  // training steps only (no estimates), this invocation
  int64_t train_tokens = 0;  // this invocation, over all ranks
};

// Model, data and training set-up, as a summary and a prediction both begin.
void write_setup(mg::JsonWriter& json, const Args& args, const TextCorpus& corpus, int64_t batch_size);

// The whole summary, written atomically to args.summary_json. val_loss and train_loss are
// the last estimate's (null before the first).
// `peaks`: every rank's (examples::DistributedRun::peaks_by_rank), as "memory_per_rank".
void write_summary(const Args& args, const TextCorpus& corpus, const RunState& state, const SessionFacts& facts,
                   const std::vector<mg::memory::Snapshot>& peaks);

}  // namespace gpt
