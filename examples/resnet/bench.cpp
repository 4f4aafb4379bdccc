// examples/resnet/bench.cpp — times ResNet training steps (zero_grad, forward,
// cross-entropy, backward, SGD step; with --accum N, N forwards and backwards before the
// step; with --amp, forward under autocast and a float16 loss scaled) on one fixed random
// batch, as bench/train_step.cpp does for the MLP: after --warmup untimed steps, one step
// measures peak memory from reset_peak_stats(), then --steps steps are marked on the
// device's timeline (CUDA events on a GPU) and their median, p10 and p90 reported, with the timed loop's wall time per step (mean_ms).
// Human-readable lines go to stderr, and one JSON line with bench_train_step's fields to
// stdout (and to --summary-json), for bench/summarize.py. With --memory-timeline FILE.html
// every step run is recorded, so the times include the recorder's cost.
#include "examples/resnet/bench.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "autograd/loss.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/memory.h"
#include "core/memory_category.h"
#include "core/memory_context.h"
#include "core/memory_format.h"
#include "core/random.h"
#include "examples/common/accumulation.h"
#include "examples/common/cli.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/summary.h"
#include "examples/common/step_benchmark.h"
#include "nn/resnet.h"
#include "optim/sgd.h"

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

}  // namespace

int run_bench(const Args& args) {
  if (args.threads) examples::set_cpu_threads(*args.threads);
  if (!args.summary_json.empty()) examples::check_writable(args.summary_json, "--summary-json");
  // Records every step (steps = 0: until finish()), so that the timings include its cost.
  examples::MemoryTimeline memory_timeline(args.memory_timeline, args.device, /*steps=*/0);
  mg::manual_seed(args.seed);
  const BenchShape shape = shape_of(args.model);
  mg::Generator init_generator(args.seed);
  const mg::nn::ResNetOptions options{.num_classes = shape.classes,
                                      .small_image_stem = shape.small_image_stem,
                                      .in_channels = 3,
                                      .generator = &init_generator,
                                      .checkpoint_stages = args.checkpoint};
  std::shared_ptr<mg::nn::ResNet> model =
      args.model == "resnet50" ? mg::nn::resnet50(options) : mg::nn::resnet18(options);
  model->to(args.device);
  if (args.channels_last) model->to(mg::MemoryFormat::ChannelsLast);
  model->train();
  mg::optim::SGD optimizer(model->parameters(),
                           {.lr = args.lr, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  // NOTE: made on the host and copied over, as a loader's batch arrives; the one batch is
  // reused by every step (and every micro-batch of a step) so that the step is timed, not
  // the input pipeline, and INPUT memory does not grow with --accum.
  mg::Generator data_generator(args.seed + 1);
  mg::Tensor inputs =
      mg::randn({args.batch_size, 3, shape.image_size, shape.image_size}, {}, &data_generator).to(args.device);
  if (args.channels_last) inputs = inputs.contiguous(mg::MemoryFormat::ChannelsLast);
  const mg::Tensor targets =
      mg::randint(0, shape.classes, {args.batch_size}, {.dtype = mg::DType::Int64}, &data_generator).to(args.device);
  inputs.set_memory_category(mg::MemoryCategory::Input);
  targets.set_memory_category(mg::MemoryCategory::Input);
  examples::MixedPrecision precision(args.amp, args.device);
  auto step = [&] {
    optimizer.zero_grad();
    for (int64_t i = 0; i < args.accum; ++i) {
      mg::Tensor loss;
      {
        examples::AutocastRegion autocast(precision);
        mg::memory::PhaseScope forward(mg::memory::Phase::Forward);
        loss = mg::cross_entropy((*model)(inputs), targets);
      }
      examples::backward_micro_batch(precision.scale(loss), args.accum);
    }
    precision.step(optimizer);
    memory_timeline.step_done();
  };
  const int64_t samples_per_step = args.batch_size * args.accum;

  memory_timeline.start();
  const examples::StepMeasurement measurement = examples::measure_steps(args.device, args.warmup, args.steps, step);
  memory_timeline.finish();
  const mg::memory::Snapshot& memory = measurement.memory;

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("model").value(args.model)
      .key("batch").value(args.batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(args.checkpoint)
      .key("optim").value("sgd")
      .key("device").value(args.device.is_cuda() ? "cuda" : "cpu")
      .key("memory_format").value(args.channels_last ? "channels_last" : "contiguous")
      .key("amp").value(examples::amp_name(args.amp))
      .key("memory_timeline").value(!args.memory_timeline.empty())
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps);
  examples::write_step_fields(json, measurement, samples_per_step);
  json.end_object();
  const std::string line = json.str();

  std::fprintf(stderr, "%s, batch %lld%s of %lldx%lldx%lld%s%s%s on %s: median step %.2f ms (p10 %.2f, p90 %.2f), "
               "%.1f samples/s, peak allocated %.1f MiB\n%s\n",
               args.model.c_str(), static_cast<long long>(args.batch_size),
               args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "", 3LL,
               static_cast<long long>(shape.image_size), static_cast<long long>(shape.image_size),
               args.channels_last ? " channels-last" : "", args.checkpoint ? ", stages checkpointed" : "",
               args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "",
               args.device.str().c_str(), measurement.median_ms, measurement.p10_ms, measurement.p90_ms,
               measurement.samples_per_s(samples_per_step),
               static_cast<double>(memory.peak_allocated_bytes) / (1024.0 * 1024.0),
               mg::memory::report(memory).c_str());
  std::cout << line << std::endl;
  if (!args.summary_json.empty()) examples::write_file_atomically(args.summary_json, line);
  return 0;
}

}  // namespace resnet
