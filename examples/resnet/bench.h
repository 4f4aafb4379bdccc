// examples/resnet/bench.h — `resnet --bench`: the training step's speed and peak memory on
// synthetic data, measured, or predicted on the simulated device (--predict-memory,
// --fit-batch).
#pragma once

#include <memory>

#include <memgrad/core/device.h>
#include <memgrad/distributed/process_group.h>
#include <memgrad/memory/snapshot.h>
#include "examples/common/budget_plan.h"
#include "examples/resnet/args.h"

namespace resnet {

// Times the step (bench.cpp); with --distributed, on every rank of the job, rank 0
// reporting.
int run_bench(const Args& args);

// The allocator's state on `device` after --warmup bench steps and one more from
// reset_peak_stats() (examples::measure_peak_step): the peaks run_bench reports, without
// the timing. With `group` (a per-rank prediction's SimulatedProcessGroup), as that rank
// of --bench --distributed: the model in DDP over it, with --zero ZeRO-1 SGD; nullptr: one
// process.
mg::memory::Snapshot bench_step_memory(const Args& args, mg::Device device,
                                       const std::shared_ptr<mg::distributed::ProcessGroup>& group);

// --memory-budget's problem (examples/common/budget_plan.h) for a ResNet of `parameters`:
// the bench's model or the training run's.
examples::BudgetProblem budget_problem(const Args& args, int64_t parameters);

// --bench --memory-budget (examples/common/budget_plan.h): `args` with the levers of the
// fastest step that fits the budget (--checkpoint, --optimizer-state with --optimizer adamw,
// --batch and --accum), the choice printed to stderr; an mg::Error naming the smallest budget
// that would do when none fits.
Args plan_bench_for_budget(const Args& args);

// --bench --predict-memory / --fit-batch: the peaks of bench_step_memory for --device, run
// on the simulated device; with --distributed --world-size N [--zero], per rank of an
// N-rank --bench --distributed (rank 0's step; --batch per rank). The JSON line (stdout,
// --summary-json) has run_bench's settings, a "prediction" section and a "memory" section.
int predict_bench_memory(const Args& args);

}  // namespace resnet
