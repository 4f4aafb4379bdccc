// examples/gpt/main.cpp — trains a byte-level GPT on text (the fortunes of Debian's
// `fortunes` package by default), estimates its training and validation losses as it goes,
// and ends with where the memory went and, with --sample, text the model writes.
// --predict-memory / --fit-batch run the same steps on the simulated device instead;
// --memory-budget first plans the run (examples/common/budget_plan.h);
// --bench times steps on random tokens (bench.cpp); --dump-windows writes the windows a
// run would train on. Under mpirun (or --distributed) it trains data-parallel
// (examples/common/distributed_run.h): each rank draws its own windows, DDP averages the
// gradients.
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command
// line (printed as one line, before any work).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/determinism.h>
#include <memgrad/autograd/anomaly_mode.h>
#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/shape.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/memory/step_cost.h>
#include <memgrad/core/random.h>
#include <memgrad/io/safetensors.h>
#include "examples/common/block_checkpoint_flag.h"
#include "examples/common/budget_plan.h"
#include "examples/common/cli.h"
#include "examples/common/distributed_run.h"
#include "examples/common/init_from.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/memory_report.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/optimizer_state.h"
#include "examples/common/progress.h"
#include "examples/common/summary.h"
#include "examples/common/timeline.h"
#include "examples/gpt/args.h"
#include "examples/gpt/bench.h"
#include "examples/gpt/checkpoint.h"
#include "examples/gpt/data.h"
#include "examples/gpt/sampling.h"
#include "examples/gpt/summary.h"
#include "examples/gpt/training.h"
#include "examples/gpt/windows.h"
#include <memgrad/nn/gpt.h>
#include <memgrad/nn/module.h>
#include <memgrad/optim/adam.h>
#include <memgrad/optim/scheduler.h>

namespace {

using Clock = std::chrono::steady_clock;
using gpt::Args;
using gpt::RunState;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The run's random streams besides initialisation (which draws from --seed itself, as the
// other examples do).
enum class Stream : uint64_t { Windows = 1, Dropout, TrainEstimate, ValidationEstimate, Sampling };

// A Philox key per stream, mixed from --seed by SplitMix64's finaliser.
// NOTE: seed + stream would give two runs with neighbouring seeds the same streams
// crosswise; the mix makes every (seed, stream) pair's key unrelated to the others.
uint64_t stream_seed(uint64_t seed, Stream stream) { return examples::mix_seed(seed, static_cast<uint64_t>(stream)); }

// The GPT the command line asks for, initialised from --seed, on `device`.
std::shared_ptr<mg::nn::GPT> build_model(const Args& args, mg::Device device) {
  mg::Generator init_generator(args.seed);
  auto model = std::make_shared<mg::nn::GPT>(gpt::model_options(args), &init_generator);
  model->to(device);
  return model;
}

gpt::TextCorpus load_text(const Args& args) {
  gpt::TextCorpus corpus = gpt::load_corpus(args.data);
  gpt::check_fits_windows(corpus, gpt::model_options(args).block_size);
  return corpus;
}

void print_setup(const Args& args, const gpt::TextCorpus& corpus, const mg::nn::GPT& model, int64_t resumed_from,
                 const examples::DistributedRun& distributed) {
  const mg::nn::GPTOptions& options = model.options();
  std::printf("gpt on %s: %zu file%s%s, %zu bytes for training and %zu for validation\n", corpus.source.c_str(),
              corpus.files.size(), corpus.files.size() == 1 ? "" : "s",
              corpus.skipped.empty() ? "" : (" (" + std::to_string(corpus.skipped.size()) +
                                             " more skipped: not UTF-8 text)").c_str(),
              corpus.train.size(), corpus.validation.size());
  std::printf("%lld parameters (%lld layers, %lld heads, %lld wide, block %lld, dropout %g, vocabulary 256 bytes)%s\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(options.n_layer),
              static_cast<long long>(options.n_head), static_cast<long long>(options.n_embd),
              static_cast<long long>(options.block_size), options.dropout,
              examples::block_checkpoint_phrase(args.checkpoint, mg::nn::GPTOptions{}.checkpoint_policy).c_str());
  std::printf("%s%s (betas 0.9, 0.99, weight decay 0.1), lr %g after %lld warm-up steps, cosine to %g; batch %lld x %lld "
              "bytes%s%s; %lld steps on %s%s%s\n",
              args.zero ? "ZeRO-1 " : "", examples::describe_adamw(args.optimizer_state).c_str(), args.lr,
              static_cast<long long>(gpt::warmup_steps(args)), args.lr / 10,
              static_cast<long long>(args.batch_size), static_cast<long long>(options.block_size),
              distributed.active() ? (" per rank on " + distributed.describe()).c_str() : "",
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated per step").c_str() : "",
              static_cast<long long>(args.steps), args.device.str().c_str(),
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "",
              resumed_from > 0 ? (", resumed after step " + std::to_string(resumed_from)).c_str() : "");
  std::fflush(stdout);
}

void print_sample(const Args& args, mg::nn::GPT& model, const examples::MixedPrecision& precision) {
  std::printf("--- sample: %lld bytes after the prompt, temperature %g, top-k %s ---\n",
              static_cast<long long>(args.sample), args.temperature,
              args.top_k ? std::to_string(*args.top_k).c_str() : "all");
  std::fflush(stdout);
  mg::Generator generator(stream_seed(args.seed, Stream::Sampling));
  const gpt::Sample sample = gpt::generate(model, precision,
                                          {.bytes = args.sample, .temperature = args.temperature, .top_k = args.top_k,
                                           .prompt = args.prompt, .kv_cache = args.kv_cache},
                                          generator, stdout);
  std::printf("\n--- end of sample ---\n");
  std::printf("sampling: %lld bytes in %.3f s, %.3f ms/token (%s)\n", static_cast<long long>(sample.text.size()),
              sample.seconds, sample.ms_per_byte(), args.kv_cache ? "KV cache" : "no KV cache: the window per byte");
}

int run_training(const Args& command_line) {
  examples::DistributedRun distributed = examples::DistributedRun::start(command_line.distributed, command_line.device);
  Args args = command_line;
  args.device = distributed.device();  // this rank's GPU
  if (args.threads) examples::set_cpu_threads(*args.threads);
  examples::apply_memory_cap(args.out_of_memory, args.device);
  if (!args.init_from.empty()) examples::check_initial_weights(args.init_from, gpt::kModelName);
  examples::MemoryTimeline memory_timeline(
      distributed.is_main() ? args.memory_recording : examples::MemoryRecordingFiles{}, args.device);
  const gpt::TextCorpus corpus = load_text(args);

  std::shared_ptr<mg::nn::GPT> model = build_model(args, args.device);
  if (!args.init_from.empty()) examples::load_initial_weights(args.init_from, gpt::kModelName, *model);
  distributed.wrap(model);  // DDP when distributed: the step's losses go through it
  std::unique_ptr<mg::optim::Optimizer> optimizer =
      examples::make_adamw(distributed, gpt::adamw_groups(*model, args.lr), args.zero, args.optimizer_state);
  examples::MixedPrecision precision(args.amp, args.device);
  mg::optim::WarmupCosineLR scheduler(*optimizer, gpt::warmup_steps(args), args.steps, /*min_lr_factor=*/0.1);
  // Dropout masks and windows: rank 0's streams are one process's, every other rank its own.
  mg::manual_seed(distributed.rank_seed(stream_seed(args.seed, Stream::Dropout)));
  mg::Generator windows(distributed.rank_seed(stream_seed(args.seed, Stream::Windows)));
  const gpt::WindowsDataset train_windows(corpus.train, model->options().block_size);
  // Epoch k of the loader: step k's accumulated batches, drawn when the step begins.
  mg::data::DataLoader train_loader(
      train_windows, gpt::random_window_batches(train_windows, windows, args.batch_size, args.accum, args.device));

  const gpt::RunParts parts{.precision = precision, .scheduler = scheduler, .windows = windows};
  RunState state{.total_steps = args.steps};
  if (!args.resume_path.empty()) {
    // The schedule and both generators continue where the saved run was (on any number of
    // ranks: examples/common/run_checkpoint.h).
    state = gpt::load_checkpoint(args.resume_path, *model, *optimizer, parts, args.steps, distributed);
  }
  if (!args.save_init.empty()) {
    distributed.on_main("write " + args.save_init, [&] { mg::nn::save(*model, args.save_init); });
  }
  gpt::SessionFacts facts{.parameters = model->num_parameters(),
                          .flops_per_token = model->training_flops_per_token(),
                          .ranks = distributed.size(), .resumed_from = state.step};
  print_setup(args, corpus, *model, facts.resumed_from, distributed);
  if (!args.init_from.empty()) std::printf("starting from the weights in %s\n", args.init_from.c_str());

  const Clock::time_point session_start = Clock::now();
  const double seconds_before = state.seconds;
  auto save = [&] {
    state.seconds = seconds_before + seconds_since(session_start);
    if (args.save_path.empty()) return;
    // NOTE: every rank takes part (ZeRO-1 consolidates its state on rank 0), rank 0 writes.
    const std::optional<mg::optim::OptimizerStateDict> optimizer_state = examples::checkpoint_state(*optimizer);
    distributed.on_main("write the checkpoint " + args.save_path,
                        [&] { gpt::save_checkpoint(args.save_path, *model, *optimizer_state, parts, state); });
  };
  // Both splits' losses after `state.step` steps, recorded and printed.
  auto estimate = [&] {
    const int64_t block_size = model->options().block_size;
    const double train_loss = gpt::estimate_loss(*model, precision, corpus.train, args.eval_iters, args.batch_size,
                                                 stream_seed(args.seed, Stream::TrainEstimate), &distributed)
                                  .item<double>();
    const double val_loss = gpt::estimate_loss(*model, precision, corpus.validation, args.eval_iters, args.batch_size,
                                               stream_seed(args.seed, Stream::ValidationEstimate), &distributed)
                                .item<double>();
    const double seconds = seconds_before + seconds_since(session_start);
    if (state.eval_steps.empty() || val_loss < state.best_val_loss) {
      state.best_val_loss = val_loss;
      state.best_step = state.step;
      state.seconds_to_best = seconds;
    }
    state.eval_steps.push_back(state.step);
    state.train_losses.push_back(train_loss);
    state.val_losses.push_back(val_loss);
    std::printf("step %lld: train loss %.4f, val loss %.4f (%lld windows of %lld bytes each), lr %.3g, %.1f s\n",
                static_cast<long long>(state.step), train_loss, val_loss,
                static_cast<long long>(args.eval_iters * args.batch_size), static_cast<long long>(block_size),
                scheduler.last_lr(), seconds);
    std::fflush(stdout);
  };

  const int64_t last_step = args.stop_after > 0 ? std::min(args.stop_after, args.steps) : args.steps;
  const int64_t tokens_per_step = args.batch_size * args.accum * model->options().block_size * distributed.size();
  // NOTE: a new progress line after every estimate, so that its speed and ETA are the
  // training steps' own.
  examples::Progress progress("step", args.steps, "tokens", args.device, state.step);
  int64_t tokens_since_estimate = 0;
  mg::Tensor loss_since_line = mg::zeros({}, {.device = args.device});  // summed on the device, read per line
  int64_t steps_since_line = 0;
  double estimate_seconds = 0;  // estimates and saves, left out of the training speed
  std::optional<examples::GraphedStep> graph;  // --cuda-graph
  if (args.cuda_graph) graph.emplace(args.device);
  examples::AutoAccumulation auto_accum(args.out_of_memory.auto_accum);
  memory_timeline.start();
  const Clock::time_point loop_start = Clock::now();
  while (state.step < last_step) {
    // A step retried after out of memory draws its windows and dropout masks again.
    const mg::PhiloxState windows_before = windows.state();
    std::optional<examples::StepStart> step_start;
    if (auto_accum.enabled()) step_start.emplace(*model);
    const mg::Tensor loss = gpt::train_step(
        *model, *optimizer, precision, &scheduler, train_loader, state.step,
        {.batch_size = args.batch_size, .accum = args.accum, .ddp = distributed.ddp()}, graph ? &*graph : nullptr,
        args.out_of_memory.auto_accum ? &auto_accum : nullptr, [&] {
          windows.set_state(windows_before);
          step_start->restore();
        });
    memory_timeline.step_done();
    ++state.step;
    facts.train_tokens += tokens_per_step;
    tokens_since_estimate += tokens_per_step;
    loss_since_line = loss_since_line + loss;
    ++steps_since_line;
    if (distributed.is_main() && progress.wants_update(state.step)) {  // rank 0's loss
      progress.update(state.step, tokens_since_estimate, loss_since_line.item<double>() / steps_since_line);
      loss_since_line = mg::zeros({}, {.device = args.device});
      steps_since_line = 0;
    }
    const bool estimate_due = state.step % args.eval_interval == 0 || state.step == args.steps;
    if (estimate_due || state.step == last_step) {
      // NOTE: the steps issued so far finish first, so that their time counts as training.
      examples::Timeline::synchronize(args.device);
      const Clock::time_point start = Clock::now();
      progress.finish();
      // At --stop-after only the position is saved, without an estimate the full run
      // would not make (so that a resumed run's history is the uninterrupted one's).
      examples::finish_optimizer_step(*optimizer);  // the model and state of `state.step` steps
      if (estimate_due) estimate();
      save();
      estimate_seconds += seconds_since(start);
      progress = examples::Progress("step", args.steps, "tokens", args.device, state.step);
      tokens_since_estimate = 0;
    }
  }
  examples::Timeline::synchronize(args.device);
  facts.train_seconds = seconds_since(loop_start) - estimate_seconds;
  progress.finish();
  memory_timeline.finish();
  state.seconds = seconds_before + seconds_since(session_start);

  examples::print_memory_report(
      stdout, args.device,
      {.parameter = "weights, biases and LayerNorm parameters",
       .optimizer_state = std::string("AdamW's moments and step counters") + (args.zero ? " (this rank's shard)" : "") +
                          (args.optimizer_state == examples::OptimizerState::EightBit ? ", 8-bit with absmaxes" : ""),
       .input = "batches"});
  const std::vector<mg::memory::Snapshot> peaks = distributed.peaks_by_rank();  // every rank joins
  if (distributed.active()) examples::print_peaks_by_rank(stdout, peaks);
  if (state.eval_steps.empty()) {
    std::printf("gpt: %lld of %lld steps, no estimate yet\n", static_cast<long long>(state.step),
                static_cast<long long>(args.steps));
  } else {
    const double tokens_per_s = facts.train_seconds > 0 ? facts.train_tokens / facts.train_seconds : 0.0;
    std::printf("gpt: val loss %.4f after %lld of %lld steps; best %.4f (step %lld, %.1f s into the run); %.0f tokens/s, "
                "%.2f TFLOP/s of model FLOPs\n",
                state.val_losses.back(), static_cast<long long>(state.step), static_cast<long long>(args.steps),
                state.best_val_loss, static_cast<long long>(state.best_step), state.seconds_to_best, tokens_per_s,
                facts.flops_per_token * tokens_per_s / 1e12);
  }
  if (args.sample > 0 && distributed.is_main()) print_sample(args, *model, precision);
  if (!args.summary_json.empty()) {
    distributed.on_main("write " + args.summary_json, [&] { gpt::write_summary(args, corpus, state, facts, peaks); });
    std::printf("summary written to %s\n", args.summary_json.c_str());
  }
  return 0;
}

// The first optimizer steps of a training run (examples::kPredictedSteps) and one estimate
// batch, as run_training runs them, with the model and batches on the (simulated) device;
// with a group, as that rank of --distributed (the losses through DDP, ZeRO-1 AdamW with
// --zero). The text itself stays in host memory, outside the allocator, in a prediction as
// in a run. With `cost`, the training steps' cost (memory/step_cost.h's H100 rates), per
// step. `args` and `corpus` must outlive the steps.
examples::DistributedStepsOnDevice predicted_training(const Args& args, const gpt::TextCorpus& corpus,
                                                      mg::memory::StepCost* cost) {
  return [&args, &corpus, cost](mg::Device device, int64_t batch_size,
                                const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
    examples::DistributedRun distributed(device, group);
    std::shared_ptr<mg::nn::GPT> model = build_model(args, device);
    distributed.wrap(model);  // DDP when distributed: the step's losses go through it
    std::unique_ptr<mg::optim::Optimizer> optimizer =
        examples::make_adamw(distributed, gpt::adamw_groups(*model, args.lr), args.zero, args.optimizer_state);
    examples::MixedPrecision precision(args.amp, device);
    mg::manual_seed(stream_seed(args.seed, Stream::Dropout));
    mg::Generator windows(stream_seed(args.seed, Stream::Windows));
    const gpt::WindowsDataset train_windows(corpus.train, model->options().block_size);
    mg::data::DataLoader train_loader(
        train_windows, gpt::random_window_batches(train_windows, windows, batch_size, args.accum, device));
    // The training loop's sum of the losses, for its progress line.
    mg::Tensor loss_since_line = mg::zeros({}, {.device = device});
    std::optional<mg::memory::StepCostMeter> meter;
    if (cost) meter.emplace(mg::memory::DeviceRates::h100());
    for (int64_t step = 0; step < examples::kPredictedSteps; ++step) {
      loss_since_line = loss_since_line +
                        gpt::train_step(*model, *optimizer, precision, /*scheduler=*/nullptr, train_loader, step,
                                        {.batch_size = batch_size, .accum = args.accum, .ddp = distributed.ddp()});
    }
    if (cost) *cost = meter->cost().per_step(examples::kPredictedSteps);
    meter.reset();
    // NOTE: rank 0's share of the estimate, not summed over the ranks: the simulated device
    // holds no losses.
    gpt::estimate_loss(*model, precision, corpus.validation, /*iters=*/1, batch_size,
                       stream_seed(args.seed, Stream::ValidationEstimate));
    return mg::memory::snapshot(device);
  };
}

// --memory-budget for a training run (examples/common/budget_plan.h): `args` with the levers
// of the fastest plan whose predicted run (predicted_training's steps and estimate) fits.
Args plan_training_for_budget(const Args& args) {
  const gpt::TextCorpus corpus = load_text(args);
  return examples::plan_levers<Args>(
      args, gpt::budget_problem(args, gpt::model_options(args)),
      [&](const Args& planned, mg::Device device, mg::memory::StepCost* cost) {
        return predicted_training(planned, corpus, cost)(device, planned.batch_size, nullptr);
      });
}

// --predict-memory / --fit-batch: predicted_training's peaks for --device, per rank with
// --distributed.
int predict_training_memory(const Args& args) {
  if (args.threads) examples::set_cpu_threads(*args.threads);
  const gpt::TextCorpus corpus = load_text(args);
  const examples::DistributedStepsOnDevice steps = predicted_training(args, corpus, /*cost=*/nullptr);
  const std::optional<examples::DistributedPrediction> per_rank =
      examples::distributed_prediction(args.distributed, args.world_size, args.zero);
  const examples::MemoryPrediction prediction =
      examples::predict_or_fit(args.device, args.batch_size, args.fit_batch, per_rank, steps);
  const mg::nn::GPTOptions options = gpt::model_options(args);
  std::printf("gpt training (%lld layers, %lld heads, %lld wide, block %lld) on %s with %s%s, batch %lld%s%s%s%s\n",
              static_cast<long long>(options.n_layer), static_cast<long long>(options.n_head),
              static_cast<long long>(options.n_embd), static_cast<long long>(options.block_size), args.data.c_str(),
              args.zero ? "ZeRO-1 " : "", examples::describe_adamw(args.optimizer_state).c_str(),
              static_cast<long long>(prediction.batch_size),
              examples::per_rank_phrase(per_rank).c_str(),
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "",
              examples::block_checkpoint_phrase(args.checkpoint, mg::nn::GPTOptions{}.checkpoint_policy).c_str(),
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "");
  examples::print_prediction(stdout, prediction, args.fit_batch);
  if (!args.summary_json.empty()) {
    examples::write_prediction_summary(args.summary_json, prediction, args.fit_batch, [&](mg::JsonWriter& json) {
      gpt::write_setup(json, args, corpus, prediction.batch_size);
    });
  }
  return 0;
}

// --dump-windows: the training windows of the first --steps steps, drawn as run_training
// draws them, so that a reference (bench/gpt_loss_reference.py) can check its own draws.
int dump_windows(const Args& args) {
  const gpt::TextCorpus corpus = load_text(args);
  const int64_t block_size = gpt::model_options(args).block_size;
  mg::Generator windows(stream_seed(args.seed, Stream::Windows));
  const gpt::WindowsDataset train_windows(corpus.train, block_size);
  mg::data::DataLoader train_loader(
      train_windows, gpt::random_window_batches(train_windows, windows, args.batch_size, args.accum, mg::Device::cpu()));
  std::vector<mg::Tensor> steps;
  for (int64_t step = 0; step < args.steps; ++step) {
    train_loader.set_epoch(step);
    std::vector<mg::Tensor> micro_batches;
    for (const mg::data::Batch& batch : train_loader) micro_batches.push_back(batch.inputs);
    steps.push_back(mg::cat(micro_batches));  // (accum x B, T)
  }
  mg::save_safetensors(args.dump_windows, {{"inputs", mg::stack(steps)}});
  std::printf("the training windows of %lld steps written to %s\n", static_cast<long long>(args.steps),
              args.dump_windows.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "gpt",
      [&](int count, char** values) {
        args = gpt::parse_args(count, values);
        return !args.help;
      },
      gpt::usage, [&] {
        const mg::autograd::DetectAnomalyGuard detect_anomaly(args.detect_anomaly);
        mg::set_deterministic_algorithms(args.deterministic);
        if (args.attention_engine) mg::cuda::set_attention_engine(*args.attention_engine);
        const bool predict = args.predict_memory || args.fit_batch.has_value();
        if (args.bench) {
          const gpt::Args planned = args.budget.budget_bytes ? gpt::plan_bench_for_budget(args) : args;
          return predict ? gpt::predict_bench_memory(planned) : gpt::run_bench(planned);
        }
        if (!args.dump_windows.empty()) return dump_windows(args);
        const gpt::Args planned = args.budget.budget_bytes ? plan_training_for_budget(args) : args;
        return predict ? predict_training_memory(planned) : run_training(planned);
      });
}
