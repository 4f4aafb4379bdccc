// examples/resnet/bench.cpp — times ResNet training steps (zero_grad, forward,
// cross-entropy, backward, SGD step; with --accum N, N forwards and backwards before the
// step; with --amp, forward under autocast and a float16 loss scaled) on one fixed random
// batch, as bench/train_step.cpp does for the MLP: after --warmup untimed steps, one step
// measures peak memory from reset_peak_stats(), then --steps steps are marked on the
// device's timeline (CUDA events on a GPU) and their median, p10 and p90 reported, with the timed loop's wall time per step (mean_ms).
// Human-readable lines go to stderr, and one JSON line with bench_train_step's fields to
// stdout (and to --summary-json), for bench/summarize.py. With --memory-timeline FILE.html
// every step run is recorded, so the times include the recorder's cost.
//
// With --distributed (under mpirun or torchrun-style variables), every rank times the same
// step with the model in DistributedDataParallel (--zero: ZeRO-1 SGD) on a random batch of
// its own (--batch per rank), so each step includes the gradients' all-reduce, its buckets
// overlapping backward; rank 0 reports the job's samples/s, every rank's median and every
// rank's peaks by category (examples/common/step_benchmark.h).
#include "examples/resnet/bench.h"

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <memgrad/autograd/loss.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/core/memory_format.h>
#include <memgrad/core/random.h>
#include <memgrad/cuda/captured_step.h>
#include "examples/common/accumulation.h"
#include "examples/common/block_checkpoint_flag.h"
#include "examples/common/cli.h"
#include "examples/common/distributed_run.h"
#include "examples/common/budget_plan.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/summary.h"
#include "examples/common/step_benchmark.h"
#include <memgrad/nn/init.h>
#include <memgrad/nn/resnet.h>
#include "examples/resnet/optimizer.h"

namespace resnet {
namespace {

struct BenchShape {
  int64_t image_size;
  int64_t classes;
  bool small_image_stem;
};

// resnet18 as on CIFAR-10 (32x32, the small-image stem), resnet50 as on ImageNet.
BenchShape shape_of(const std::string& model) {
  if (model == "resnet50") return {224, 1000, false};
  return {32, 10, true};
}


// One bench step's model, optimizer, batch and mixed precision on `run`'s device, built as
// run_bench times them (and as --predict-memory replays them on the simulated device):
// when `run` is distributed, the model in its DDP, the optimizer ZeRO-1's with --zero, and
// a batch of this rank's own.
class BenchStep {
 public:
  BenchStep(const Args& args, examples::DistributedRun& run, examples::MemoryTimeline* memory_timeline)
      : args_(args), memory_timeline_(memory_timeline), precision_(args.amp, run.device()) {
    const mg::Device device = run.device();
    mg::manual_seed(run.rank_seed(args.seed));
    const BenchShape shape = shape_of(args.model);
    mg::Generator init_generator(args.seed);
    const mg::nn::ResNetOptions options{.num_classes = shape.classes,
                                        .small_image_stem = shape.small_image_stem,
                                        .in_channels = 3,
                                        .generator = &init_generator,
                                        .checkpoint_stages = args.checkpoint};
    model_ = args.model == "resnet50" ? mg::nn::resnet50(options) : mg::nn::resnet18(options);
    model_->to(device);
    if (args.channels_last) model_->to(mg::MemoryFormat::ChannelsLast);
    model_->train();
    trained_ = run.wrap(model_);
    ddp_ = run.ddp();
    optimizer_ = make_optimizer(run, *model_, args);
    // NOTE: made on the host and copied over, as a loader's batch arrives; the one batch is
    // reused by every step (and every micro-batch of a step) so that the step is timed, not
    // the input pipeline, and INPUT memory does not grow with --accum. For the CPU the
    // host is the device, so a prediction for it (args.device cpu, `device` simulated)
    // makes the batch, and the temporaries drawing it takes, on the simulated device too.
    const mg::Device host = args.device.is_cpu() ? device : mg::Device::cpu();
    mg::Generator data_generator(run.rank_seed(args.seed + 1));
    inputs_ = mg::randn({args.batch_size, 3, shape.image_size, shape.image_size}, {.device = host}, &data_generator)
                  .to(device);
    if (args.channels_last) inputs_ = inputs_.contiguous(mg::MemoryFormat::ChannelsLast);
    targets_ = mg::randint(0, shape.classes, {args.batch_size}, {.dtype = mg::DType::Int64, .device = host},
                           &data_generator)
                   .to(device);
    inputs_.set_memory_category(mg::MemoryCategory::Input);
    targets_.set_memory_category(mg::MemoryCategory::Input);
  }

  void operator()() {
    const mg::data::Batch batch{.inputs = inputs_, .targets = targets_};
    examples::accumulate_gradients(
        *optimizer_, precision_, [&] { return batch; },
        [&](const mg::data::Batch& micro_batch) {
          return mg::cross_entropy((*trained_)(micro_batch.inputs), micro_batch.targets);
        },
        {.batches = args_.accum, .ddp = ddp_});
    precision_.step(*optimizer_);
    if (memory_timeline_ != nullptr) memory_timeline_->step_done();
  }

 private:
  const Args& args_;
  examples::MemoryTimeline* memory_timeline_;
  examples::MixedPrecision precision_;
  std::shared_ptr<mg::nn::ResNet> model_;
  std::shared_ptr<mg::nn::Module> trained_;  // model_, or its DDP
  mg::distributed::DistributedDataParallel* ddp_ = nullptr;
  std::unique_ptr<mg::optim::Optimizer> optimizer_;
  mg::Tensor inputs_, targets_;
};

// The run's settings, the first members of its JSON line (measured or predicted).
void write_bench_config(mg::JsonWriter& json, const Args& args, int64_t batch_size) {
  json.key("framework").value("memgrad")
      .key("model").value(args.model)
      .key("batch").value(batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(mg::nn::block_checkpoint_name(args.checkpoint))
      .key("optim").value(optimizer_name(args))
      .key("optimizer_state").value(examples::optimizer_state_name(args.optimizer_state))
      .key("device").value(args.device.is_cuda() ? "cuda" : "cpu")
      .key("memory_format").value(args.channels_last ? "channels_last" : "contiguous")
      .key("amp").value(examples::amp_name(args.amp));
  examples::write_planned_step(json, args.planned_step);
}

}  // namespace

mg::memory::Snapshot bench_step_memory(const Args& args, mg::Device device,
                                       const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
  examples::DistributedRun run(device, group);
  BenchStep step(args, run, nullptr);
  return examples::measure_peak_step(device, args.warmup, std::ref(step), &run).memory;
}

examples::BudgetProblem budget_problem(const Args& args, int64_t parameters) {
  using examples::OptimizerState;
  return {.budget_bytes = *args.budget.budget_bytes,
          .explain = args.budget.explain,
          .target = args.device,
          .batch_size = args.batch_size,
          .accum = args.accum,
          // SGD's momentum has one place; AdamW's state has four.
          .optimizer_states = args.optimizer == Optimizer::AdamW
                                  ? std::vector<OptimizerState>{OptimizerState::Device, OptimizerState::EightBit,
                                                                OptimizerState::Offload, OptimizerState::OffloadDelayed}
                                  : std::vector<OptimizerState>{OptimizerState::Device},
          .parameters = parameters};
}

Args plan_bench_for_budget(const Args& args) {
  const BenchShape shape = shape_of(args.model);
  const mg::nn::init::SkipInitGuard no_values;
  const mg::nn::ResNetOptions options{.num_classes = shape.classes, .small_image_stem = shape.small_image_stem};
  const int64_t parameters =
      (args.model == "resnet50" ? mg::nn::resnet50(options) : mg::nn::resnet18(options))->num_parameters();
  return examples::plan_levers<Args>(
      args, budget_problem(args, parameters), [](const Args& planned, mg::Device device, mg::memory::StepCost* cost) {
        examples::DistributedRun run(device, nullptr);
        BenchStep step(planned, run, nullptr);
        return examples::measure_costed_peak_step(device, planned.warmup, std::ref(step), &run, cost,
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
  const BenchShape shape = shape_of(args.model);
  BenchStep step(args, run, &memory_timeline);
  const int64_t samples_per_step = args.batch_size * args.accum;
  const int64_t job_samples_per_step = samples_per_step * run.size();

  memory_timeline.start();
  std::optional<mg::cuda::CapturedStep> captured;
  if (args.cuda_graph) captured.emplace(std::ref(step), mg::cuda::CaptureOptions{.device = args.device});
  const examples::StepMeasurement measurement = examples::measure_steps(
      args.device, args.warmup, args.steps, examples::replay_or(captured, std::ref(step)), &run);
  memory_timeline.finish();
  const examples::RankFigures ranks = examples::gather_rank_figures(run, measurement);  // every rank joins
  if (!run.is_main()) return 0;
  const mg::memory::Snapshot& memory = measurement.memory;

  mg::JsonWriter json;
  json.begin_object();
  write_bench_config(json, args, args.batch_size);
  json.key("memory_timeline").value(args.memory_recording.any())
      .key("cuda_graph").value(args.cuda_graph)
      .key("cudnn_fusion").value(args.cudnn_fusion)
      .key("cudnn_backward_fusion").value(args.cudnn_backward_fusion)
      .key("cudnn_benchmark").value(args.cudnn_benchmark)
      .key("dependent_launch").value(args.dependent_launch)
      .key("wgrad_stream").value(args.wgrad_stream)
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps);
  examples::write_step_fields(json, measurement, job_samples_per_step);
  examples::write_rank_fields(json, run, args.zero, ranks);
  if (captured) json.key("graph_pool_bytes").value(static_cast<int64_t>(captured->pool_bytes()));
  json.end_object();
  const std::string line = json.str();

  std::fprintf(stderr, "%s, batch %lld%s of %lldx%lldx%lld%s%s%s on %s%s: median step %.2f ms (p10 %.2f, p90 %.2f), "
               "%.1f samples/s, peak allocated %.1f MiB\n%s\n",
               args.model.c_str(), static_cast<long long>(args.batch_size),
               args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "", 3LL,
               static_cast<long long>(shape.image_size), static_cast<long long>(shape.image_size),
               args.channels_last ? " channels-last" : "",
               examples::block_checkpoint_phrase(args.checkpoint, mg::nn::ResNetOptions{}.checkpoint_policy).c_str(),
               args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "",
               args.device.str().c_str(), examples::describe_ranks(run, args.zero).c_str(), measurement.median_ms,
               measurement.p10_ms, measurement.p90_ms, measurement.samples_per_s(job_samples_per_step),
               static_cast<double>(memory.peak_allocated_bytes) / (1024.0 * 1024.0),
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
                                     json.key("warmup").value(args.warmup);
                                   });
  return 0;
}

}  // namespace resnet
