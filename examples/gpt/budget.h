// examples/gpt/budget.h — `gpt --bench --memory-budget BYTES [--explain-plan]`: the
// fastest bench step that fits BYTES, chosen by mg::memory::plan_for_budget among every
// combination of the levers the program has:
//   checkpointing      none, or every block (--checkpoint)
//   optimizer state    device, 8bit, offload, offload-delayed (--optimizer-state)
//   micro-batching     --batch B --accum A as --batch B/m --accum A*m, for every m = 1, 2,
//                      4, ... dividing B (the same windows and loss weights each step)
// Each plan's peak reserved bytes are predicted on the simulated device for --device (exact,
// as --predict-memory), its step time by memory/step_cost.h's rates for an H100 (with an
// offloaded optimizer's host update and copies added). The chosen plan then runs (or is
// predicted, with --predict-memory) as if its flags had been given.
#pragma once

#include "examples/gpt/args.h"

namespace gpt {

// `args` with the levers of the fastest plan that fits args.memory_budget; prints the plan
// chosen (and with --explain-plan every plan weighed) to stderr. Throws an mg::Error naming
// the smallest budget that would fit when none does.
Args plan_bench_for_budget(const Args& args);

}  // namespace gpt
