// examples/gpt/bench.cpp — times a GPT's training step on one fixed batch of random tokens,
// as examples/resnet/bench.cpp times ResNet's and bench/torch_reference.py --model gpt2
// times PyTorch's: a step is zero_grad; per micro-batch (--accum) forward under autocast
// (--amp), the cross-entropy of every position's next token and backward; the gradients'
// norm clipped to 1; an AdamW step (the training run's: betas 0.9 / 0.99, weight decay 0.1
// on matrices only). After --warmup untimed steps, one step from reset_peak_stats() gives
// the peak memory, then --steps steps are marked on the device's timeline (CUDA events on
// a GPU) and their median, p10 and p90 reported (examples/common/step_benchmark.h).
// Human-readable lines go to stderr, one JSON line with bench_train_step's fields (plus
// tokens_per_s and the model's sizes) to stdout and --summary-json, for bench/summarize.py.
//
// With --distributed (under mpirun or torchrun-style variables), every rank times the same
// step with the model in DistributedDataParallel (--zero: ZeRO-1 AdamW, each rank keeping
// the moments of its 1/ranks of the parameters) on random tokens of its own and dropout
// masks of its own (--batch per rank), so each step includes the gradients' all-reduce, its
// buckets overlapping backward; rank 0 reports the job's tokens/s, every rank's median and
// every rank's peaks by category (examples/common/step_benchmark.h).
#include "examples/gpt/bench.h"

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/memory/context.h>
#include <memgrad/core/random.h>
#include <memgrad/cuda/captured_step.h>
#include "examples/common/block_checkpoint_flag.h"
#include "examples/common/cli.h"
#include "examples/common/distributed_run.h"
#include "examples/common/budget_plan.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/step_benchmark.h"
#include "examples/common/summary.h"
#include "examples/gpt/training.h"
#include <memgrad/nn/gpt.h>
#include <memgrad/nn/init.h>
#include <memgrad/optim/adam.h>

namespace gpt {
namespace {

mg::nn::GPTOptions bench_model_options(const Args& args) {
  mg::nn::GPTOptions options = model_options(args);
  options.vocab_size = kBenchVocabulary;
  return options;
}

// A bench step's model on `run`'s device: the bench's sizes, initialised from --seed on
// every rank; dropout (where the preset has it) draws this rank's masks.
std::shared_ptr<mg::nn::GPT> make_bench_model(const Args& args, const examples::DistributedRun& run) {
  mg::manual_seed(run.rank_seed(args.seed));
  mg::Generator init_generator(args.seed);
  auto model = std::make_shared<mg::nn::GPT>(bench_model_options(args), &init_generator);
  model->to(run.device());
  model->train();
  return model;
}

// The model in `run`'s DDP when distributed (the losses go through it): that DDP, else
// nullptr.
mg::distributed::DistributedDataParallel* wrap_in_ddp(examples::DistributedRun& run,
                                                     const std::shared_ptr<mg::nn::GPT>& model) {
  run.wrap(model);
  return run.ddp();
}

// One bench step's model, optimizer, batch and mixed precision on `run`'s device, built as
// run_bench times them (and as --predict-memory replays them on the simulated device):
// the training run's step (training.h's optimizer_step) on one fixed batch; when `run` is
// distributed, the model in its DDP, the optimizer ZeRO-1's with --zero, and a batch of
// this rank's own.
class BenchStep {
 public:
  BenchStep(const Args& args, examples::DistributedRun& run, examples::MemoryTimeline* memory_timeline)
      : args_(args),
        memory_timeline_(memory_timeline),
        precision_(args.amp, run.device()),
        model_(make_bench_model(args, run)),
        ddp_(wrap_in_ddp(run, model_)),
        // The training run's optimizer; its learning rate does not change the time.
        optimizer_(examples::make_adamw(run, adamw_groups(*model_, args.lr), args.zero, args.optimizer_state)) {
    const mg::Device device = run.device();
    // NOTE: made on the host and copied over, as a loader's batch arrives, and reused by
    // every step and micro-batch: the step is timed, not the input. For a CPU prediction
    // (args.device cpu, `device` simulated) the host is the device, so the batch is made
    // on the simulated device too.
    const mg::Device host = args.device.is_cpu() ? device : mg::Device::cpu();
    const int64_t block_size = model_->options().block_size;
    mg::Generator data_generator(run.rank_seed(args.seed + 1));
    const mg::TensorOptions tokens{.dtype = mg::DType::Int64, .device = host};
    batch_.inputs = mg::randint(0, kBenchTokens, {args.batch_size, block_size}, tokens, &data_generator).to(device);
    batch_.targets = mg::randint(0, kBenchTokens, {args.batch_size, block_size}, tokens, &data_generator).to(device);
    batch_.inputs.set_memory_category(mg::MemoryCategory::Input);
    batch_.targets.set_memory_category(mg::MemoryCategory::Input);
  }

  void operator()() {
    optimizer_step(*model_, *optimizer_, precision_, [this] { return batch_; },
                   StepPlan{.batch_size = args_.batch_size, .accum = args_.accum, .clip_norm = 1.0, .ddp = ddp_});
    if (memory_timeline_ != nullptr) memory_timeline_->step_done();
  }

  const mg::nn::GPT& model() const { return *model_; }

 private:
  const Args& args_;
  examples::MemoryTimeline* memory_timeline_;
  examples::MixedPrecision precision_;
  std::shared_ptr<mg::nn::GPT> model_;
  mg::distributed::DistributedDataParallel* ddp_;  // model_'s DDP, or nullptr
  std::unique_ptr<mg::optim::Optimizer> optimizer_;
  mg::data::Batch batch_;  // (B, T) int64 inputs and targets
};

// The run's settings, the first members of its JSON line (measured or predicted).
void write_bench_config(mg::JsonWriter& json, const Args& args, int64_t batch_size) {
  const mg::nn::GPTOptions options = bench_model_options(args);
  json.key("framework").value("memgrad")
      .key("model").value(args.preset)
      .key("n_layer").value(options.n_layer)
      .key("n_head").value(options.n_head)
      .key("n_embd").value(options.n_embd)
      .key("block_size").value(options.block_size)
      .key("vocab_size").value(options.vocab_size)
      .key("batch").value(batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(mg::nn::block_checkpoint_name(args.checkpoint))
      .key("optim").value("adamw")
      .key("device").value(args.device.is_cuda() ? "cuda" : "cpu")
      .key("amp").value(examples::amp_name(args.amp))
      .key("optimizer_state").value(examples::optimizer_state_name(args.optimizer_state));
  examples::write_planned_step(json, args.planned_step);
}

}  // namespace

mg::memory::Snapshot bench_step_memory(const Args& args, mg::Device device,
                                       const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
  examples::DistributedRun run(device, group);
  BenchStep step(args, run, nullptr);
  return examples::measure_peak_step(device, bench_warmup_steps(args), std::ref(step), &run).memory;
}

examples::BudgetProblem budget_problem(const Args& args, const mg::nn::GPTOptions& options) {
  mg::Generator generator(0);
  const mg::nn::init::SkipInitGuard no_values;
  return {.budget_bytes = *args.budget.budget_bytes,
          .explain = args.budget.explain,
          .target = args.device,
          .batch_size = args.batch_size,
          .accum = args.accum,
          .optimizer_states = {examples::OptimizerState::Device, examples::OptimizerState::EightBit,
                               examples::OptimizerState::Offload, examples::OptimizerState::OffloadDelayed},
          .parameters = mg::nn::GPT(options, &generator).num_parameters()};
}

Args plan_bench_for_budget(const Args& args) {
  return examples::plan_levers<Args>(
      args, budget_problem(args, bench_model_options(args)),
      [](const Args& planned, mg::Device device, mg::memory::StepCost* cost) {
        examples::DistributedRun run(device, nullptr);
        BenchStep step(planned, run, nullptr);
        return examples::measure_costed_peak_step(device, bench_warmup_steps(planned), std::ref(step), &run, cost,
                                                  mg::memory::DeviceRates::h100())
            .memory;
      });
}


int run_bench(const Args& command_line) {
  examples::DistributedRun run = examples::DistributedRun::start(command_line.distributed, command_line.device);
  Args args = command_line;
  args.device = run.device();  // this rank's GPU
  if (args.threads) examples::set_cpu_threads(*args.threads);
  // Records every step (steps = 0: until finish()), so that the timings include its cost.
  examples::MemoryTimeline memory_timeline(
      run.is_main() ? args.memory_recording : examples::MemoryRecordingFiles{}, args.device, /*steps=*/0);
  BenchStep step(args, run, &memory_timeline);
  const mg::nn::GPTOptions& options = step.model().options();
  const int64_t job_windows_per_step = args.batch_size * args.accum * run.size();
  const int64_t warmup = bench_warmup_steps(args);

  memory_timeline.start();
  std::optional<mg::cuda::CapturedStep> captured;
  if (args.cuda_graph) captured.emplace(std::ref(step), mg::cuda::CaptureOptions{.device = args.device});
  const examples::StepMeasurement measurement = examples::measure_steps(
      args.device, warmup, args.steps, examples::replay_or(captured, std::ref(step)), &run);
  memory_timeline.finish();
  const examples::RankFigures ranks = examples::gather_rank_figures(run, measurement);  // every rank joins
  if (!run.is_main()) return 0;
  const mg::memory::Snapshot& memory = measurement.memory;
  const double tokens_per_s =
      measurement.samples_per_s(job_windows_per_step) * static_cast<double>(options.block_size);

  mg::JsonWriter json;
  json.begin_object();
  write_bench_config(json, args, args.batch_size);
  json.key("parameters").value(step.model().num_parameters())
      .key("memory_timeline").value(args.memory_recording.any())
      .key("cuda_graph").value(args.cuda_graph)
      .key("warmup").value(warmup)
      .key("steps").value(args.steps);
  examples::write_step_fields(json, measurement, job_windows_per_step);
  const double flops_per_token = step.model().training_flops_per_token();
  json.key("tokens_per_s").value(tokens_per_s)
      .key("model_flops_per_token").value(flops_per_token)
      .key("model_tflop_per_s").value(flops_per_token * tokens_per_s / 1e12);
  examples::write_rank_fields(json, run, args.zero, ranks);
  if (captured) json.key("graph_pool_bytes").value(static_cast<int64_t>(captured->pool_bytes()));
  json.end_object();
  const std::string line = json.str();

  std::fprintf(stderr,
               "gpt %s (%lld layers, %lld heads, %lld wide, vocabulary %lld), batch %lld%s of %lld random tokens%s%s "
               "on %s%s: median step %.2f ms (p10 %.2f, p90 %.2f), %.0f tokens/s (%.1f TFLOP/s of model FLOPs), peak "
               "allocated %.1f MiB\n%s\n",
               args.preset.c_str(), static_cast<long long>(options.n_layer), static_cast<long long>(options.n_head),
               static_cast<long long>(options.n_embd), static_cast<long long>(options.vocab_size),
               static_cast<long long>(args.batch_size),
               args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "",
               static_cast<long long>(options.block_size),
               examples::block_checkpoint_phrase(args.checkpoint, options.checkpoint_policy).c_str(),
               args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "", args.device.str().c_str(),
               examples::describe_ranks(run, args.zero).c_str(), measurement.median_ms, measurement.p10_ms, measurement.p90_ms, tokens_per_s,
               flops_per_token * tokens_per_s / 1e12, static_cast<double>(memory.peak_allocated_bytes) / (1024.0 * 1024.0),
               mg::memory::report(memory).c_str());
  examples::print_rank_figures(stderr, run, ranks);
  std::cout << line << std::endl;
  if (!args.summary_json.empty()) examples::write_file_atomically(args.summary_json, line);
  return 0;
}

int predict_bench_memory(const Args& args) {
  if (args.threads) examples::set_cpu_threads(*args.threads);
  const examples::DistributedStepsOnDevice steps =
      [&](mg::Device device, int64_t batch_size, const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
        Args at_batch = args;
        at_batch.batch_size = batch_size;
        return bench_step_memory(at_batch, device, group);
      };
  examples::print_bench_prediction(args.device, args.batch_size, args.fit_batch,
                                   examples::distributed_prediction(args.distributed, args.world_size, args.zero),
                                   steps, args.summary_json,
                                   [&](mg::JsonWriter& json, int64_t batch_size) {
                                     write_bench_config(json, args, batch_size);
                                     json.key("warmup").value(bench_warmup_steps(args));
                                   });
  return 0;
}

}  // namespace gpt
