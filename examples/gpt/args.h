// examples/gpt/args.h — the gpt program's command line: what text to train on, the model's
// size (a preset, single sizes overriding it), the optimizer's schedule, evaluation,
// checkpoints, memory tools and sampling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <memgrad/core/device.h>
#include <memgrad/core/dtype.h>
#include <memgrad/cuda/plan/attention_engine.h>
#include "examples/common/auto_accumulation.h"
#include "examples/common/budget_plan.h"
#include "examples/common/gpt_sizes.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/optimizer_state.h"
#include <memgrad/nn/gpt_options.h>

namespace gpt {

struct Args {
  std::string data = "/usr/share/games/fortunes";  // a UTF-8 text file or a folder of them
  // Model: a preset, then single sizes that replace the preset's.
  std::string preset = "small";
  examples::GPTSizeFlags sizes;  // no --vocab: the vocabulary is the 256 byte values
  std::optional<double> dropout;
  mg::nn::BlockCheckpoint checkpoint = mg::nn::BlockCheckpoint::None;  // --checkpoint [selective|whole]
  // Training.
  int64_t steps = 5000;  // optimizer steps the schedule is laid out for
  int64_t batch_size = 64;  // windows per micro-batch (per rank when distributed)
  int64_t accum = 1;        // micro-batches per optimizer step
  double lr = 1e-3;         // the schedule's peak
  std::optional<int64_t> warmup;  // unset: min(100, steps / 10)
  std::optional<mg::DType> amp;
  uint64_t seed = 0;
  mg::Device device = mg::Device::cpu();
  std::optional<int> threads;  // unset after parsing: OMP_NUM_THREADS decides (cpu_cores.h)
  // Evaluation: every eval_interval steps and after the last, the mean loss of eval_iters
  // batches of each split.
  int64_t eval_interval = 250;
  int64_t eval_iters = 200;
  // Checkpoints and files.
  std::string save_path;
  std::string resume_path;
  std::string init_from;  // --init-from FILE: a new run from a checkpoint's weights
  int64_t stop_after = 0;  // > 0: end after this many steps of the schedule
  std::string summary_json;
  examples::MemoryRecordingFiles memory_recording;  // --memory-timeline, --memory-snapshot, --memory-trace
  bool predict_memory = false;
  std::optional<int64_t> fit_batch;
  bool detect_anomaly = false;  // train (or --bench) under autograd's anomaly mode
  bool deterministic = false;  // --deterministic: mg::set_deterministic_algorithms(true)
  // --attention-engine own|cudnn|auto: mg::cuda::set_attention_engine (CUDA only).
  std::optional<mg::cuda::AttentionEngine> attention_engine;
  examples::OutOfMemoryFlags out_of_memory;  // --memory-cap, --auto-accum
  examples::BudgetFlags budget;  // --bench --memory-budget BYTES [--explain-plan] (budget_plan.h)
  std::optional<examples::PlannedStep> planned_step;  // set by --memory-budget's plan (budget_plan.h)
  std::string save_init;     // the model's weights before step 0 (bench/gpt_loss_reference.py)
  std::string dump_windows;  // write the first --steps steps' training windows and exit
  // --bench: time steps on random tokens (bench.h); --steps, --warmup and --batch then
  // count timed steps, untimed steps (bench_warmup_steps) and windows of random tokens.
  bool bench = false;
  bool cuda_graph = false;  // --bench only: time replays of the step captured as a CUDA graph
  // Data-parallel: --distributed, or a launcher's two ranks or more (distributed_run.h).
  bool distributed = false;
  bool zero = false;  // --zero: ZeRO-1 (AdamW's moments sharded over the ranks)
  examples::OptimizerState optimizer_state = examples::OptimizerState::Device;  // --optimizer-state
  std::optional<int> world_size;  // --world-size N: the ranks a distributed prediction is for
  // Sampling after training: `sample` bytes after the prompt.
  int64_t sample = 0;
  double temperature = 0.8;
  std::optional<int64_t> top_k;  // unset: every byte
  std::string prompt = "\n";
  bool kv_cache = true;  // --no-kv-cache: a full forward over the window per byte
  bool help = false;
};

// Parses `--flag value` and `--flag=value`; throws examples::UsageError for unknown flags,
// missing or malformed values, sizes that do not fit together, and flags that do not fit
// the mode.
Args parse_args(int argc, char** argv);

std::string usage(const std::string& program);

// The model the command line asks for: the preset's sizes with the single flags applied,
// a vocabulary of the 256 byte values, gradient checkpointing per --checkpoint.
mg::nn::GPTOptions model_options(const Args& args);

// The warm-up steps of the schedule: --warmup, or min(100, steps / 10).
int64_t warmup_steps(const Args& args);

// --bench's untimed steps: --warmup, or 5.
int64_t bench_warmup_steps(const Args& args);

}  // namespace gpt
