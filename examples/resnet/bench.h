// examples/resnet/bench.h — `resnet --bench`: the training step's speed and peak memory on
// synthetic data, measured, or predicted on the simulated device (--predict-memory,
// --fit-batch).
#pragma once

#include <memgrad/core/device.h>
#include <memgrad/memory/snapshot.h>
#include "examples/resnet/args.h"

namespace resnet {

// Times the step (bench.cpp); with --distributed, on every rank of the job, rank 0
// reporting.
int run_bench(const Args& args);

// The allocator's state on `device` after --warmup bench steps and one more from
// reset_peak_stats(): the peaks run_bench reports, without the timing.
mg::memory::Snapshot bench_step_memory(const Args& args, mg::Device device);

// --bench --predict-memory / --fit-batch: the peaks of bench_step_memory for --device, run
// on the simulated device; the JSON line (stdout, --summary-json) has run_bench's settings,
// a "prediction" section and a "memory" section.
int predict_bench_memory(const Args& args);

}  // namespace resnet
