// examples/resnet/bench.cpp — times ResNet training steps (zero_grad, forward,
// cross-entropy, backward, SGD step) on one fixed random batch, as bench/train_step.cpp
// does for the MLP: after --warmup untimed steps, one step measures peak memory from
// reset_peak_stats(), then --steps steps are marked on the device's timeline (CUDA events
// on a GPU) and their median, p10 and p90 reported, with the timed loop's wall time per
// step (mean_ms). Human-readable lines go to stderr, and one JSON line with
// bench_train_step's fields to stdout (and to --summary-json), for bench/summarize.py.
#include "examples/resnet/bench.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "autograd/loss.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/memory.h"
#include "core/memory_category.h"
#include "core/memory_format.h"
#include "core/random.h"
#include "examples/common/cli.h"
#include "examples/common/summary.h"
#include "bench/timeline.h"
#include "nn/resnet.h"
#include "optim/sgd.h"

namespace resnet {
namespace {

using Clock = std::chrono::steady_clock;
using bench::Timeline;

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
  mg::manual_seed(args.seed);
  const BenchShape shape = shape_of(args.model);
  mg::Generator init_generator(args.seed);
  const mg::nn::ResNetOptions options{.num_classes = shape.classes,
                                      .small_image_stem = shape.small_image_stem,
                                      .in_channels = 3,
                                      .generator = &init_generator};
  std::shared_ptr<mg::nn::ResNet> model =
      args.model == "resnet50" ? mg::nn::resnet50(options) : mg::nn::resnet18(options);
  model->to(args.device);
  if (args.channels_last) model->to(mg::MemoryFormat::ChannelsLast);
  model->train();
  mg::optim::SGD optimizer(model->parameters(),
                           {.lr = args.lr, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  // NOTE: made on the host and copied over, as a loader's batch arrives; the one batch is
  // reused by every step so that the step is timed, not the input pipeline.
  mg::Generator data_generator(args.seed + 1);
  mg::Tensor inputs =
      mg::randn({args.batch_size, 3, shape.image_size, shape.image_size}, {}, &data_generator).to(args.device);
  if (args.channels_last) inputs = inputs.contiguous(mg::MemoryFormat::ChannelsLast);
  const mg::Tensor targets =
      mg::randint(0, shape.classes, {args.batch_size}, {.dtype = mg::DType::Int64}, &data_generator).to(args.device);
  inputs.set_memory_category(mg::MemoryCategory::Input);
  targets.set_memory_category(mg::MemoryCategory::Input);
  auto step = [&] {
    optimizer.zero_grad();
    mg::cross_entropy((*model)(inputs), targets).backward();
    optimizer.step();
  };

  for (int64_t i = 0; i < args.warmup; ++i) step();
  Timeline::synchronize(args.device);
  mg::memory::reset_peak_stats(args.device);
  step();
  Timeline::synchronize(args.device);
  const mg::memory::Snapshot memory = mg::memory::snapshot(args.device);

  Timeline timeline(args.device, args.steps + 1);
  const Clock::time_point loop_start = Clock::now();
  timeline.mark();
  for (int64_t i = 0; i < args.steps; ++i) {
    step();
    timeline.mark();
  }
  Timeline::synchronize(args.device);
  const double loop_ms = std::chrono::duration<double, std::milli>(Clock::now() - loop_start).count();
  const std::vector<double> step_ms = timeline.intervals_ms();
  const double mean_ms = loop_ms / static_cast<double>(args.steps);
  const double median_ms = bench::quantile(step_ms, 0.5);
  const double samples_per_s = static_cast<double>(args.batch_size) / (mean_ms / 1000.0);

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("model").value(args.model)
      .key("batch").value(args.batch_size)
      .key("optim").value("sgd")
      .key("device").value(args.device.is_cuda() ? "cuda" : "cpu")
      .key("memory_format").value(args.channels_last ? "channels_last" : "contiguous")
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps)
      .key("step_ms_median").value(median_ms)
      .key("step_ms_p10").value(bench::quantile(step_ms, 0.1))
      .key("step_ms_p90").value(bench::quantile(step_ms, 0.9))
      .key("mean_ms").value(mean_ms)
      .key("samples_per_s").value(samples_per_s)
      .key("peak_allocated_bytes").value(memory.peak_allocated_bytes)
      .key("peak_reserved_bytes").value(memory.peak_reserved_bytes)
      .key("peak_bytes_by_category").begin_object();
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    json.key(mg::category_name(static_cast<mg::MemoryCategory>(c))).value(memory.by_category[c].peak);
  }
  json.end_object().end_object();
  const std::string line = json.str();

  std::fprintf(stderr, "%s, batch %lld of %lldx%lldx%lld%s on %s: median step %.2f ms (p10 %.2f, p90 %.2f), "
               "%.1f samples/s, peak allocated %.1f MiB\n%s\n",
               args.model.c_str(), static_cast<long long>(args.batch_size), 3LL,
               static_cast<long long>(shape.image_size), static_cast<long long>(shape.image_size),
               args.channels_last ? " channels-last" : "", args.device.str().c_str(), median_ms, bench::quantile(step_ms, 0.1),
               bench::quantile(step_ms, 0.9), samples_per_s,
               static_cast<double>(memory.peak_allocated_bytes) / (1024.0 * 1024.0),
               mg::memory::report(memory).c_str());
  std::cout << line << std::endl;
  if (!args.summary_json.empty()) examples::write_file_atomically(args.summary_json, line);
  return 0;
}

}  // namespace resnet
