// examples/gpt/bench.h — `gpt --bench`: the training step of a GPT (GPT-2 124M by default:
// --preset gpt2, vocabulary 50257 padded to 50304, T = 1024) on random tokens, timed, or
// its peak memory predicted on the simulated device (--predict-memory, --fit-batch);
// bench/torch_reference.py --model gpt2 runs the same step in PyTorch.
#pragma once

#include <memory>

#include <memgrad/core/device.h>
#include <memgrad/distributed/process_group.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/nn/gpt.h>
#include "examples/common/budget_plan.h"
#include "examples/gpt/args.h"

namespace gpt {

// GPT-2's tokenizer has 50257 tokens; the model's table is padded to 50304 (a multiple of
// 64, as nanoGPT and llm.c pad it) and the random tokens are drawn below 50257.
inline constexpr int64_t kBenchTokens = 50257;
inline constexpr int64_t kBenchVocabulary = 50304;

// Times the step (bench.cpp); with --distributed, on every rank of the job, rank 0
// reporting.
int run_bench(const Args& args);

// The allocator's state on `device` after the bench's warm-up steps and one more from
// reset_peak_stats() (examples::measure_peak_step): the peaks run_bench reports, without
// the timing. With `group` (a per-rank prediction's SimulatedProcessGroup), as that rank
// of --bench --distributed: the model in DDP over it, with --zero ZeRO-1 AdamW; nullptr:
// one process.
mg::memory::Snapshot bench_step_memory(const Args& args, mg::Device device,
                                       const std::shared_ptr<mg::distributed::ProcessGroup>& group);

// --memory-budget's problem (examples/common/budget_plan.h) for a GPT of `options`: the
// bench's model or the training run's.
examples::BudgetProblem budget_problem(const Args& args, const mg::nn::GPTOptions& options);

// --bench --memory-budget (examples/common/budget_plan.h): `args` with the levers of the
// fastest step that fits the budget (--checkpoint, --optimizer-state, --batch and --accum),
// the choice printed to stderr; an mg::Error naming the smallest budget that would do when
// none fits.
Args plan_bench_for_budget(const Args& args);

// --bench --predict-memory / --fit-batch: bench_step_memory's peaks for --device, run on
// the simulated device; with --distributed --world-size N [--zero], per rank of an N-rank
// --bench --distributed (rank 0's step; --batch per rank). One JSON line (stdout,
// --summary-json) with run_bench's settings, a "prediction" section and a "memory" section.
int predict_bench_memory(const Args& args);

}  // namespace gpt
