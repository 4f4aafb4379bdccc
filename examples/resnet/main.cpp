// examples/resnet/main.cpp — trains ResNet-18 on Fashion-MNIST and reports accuracy, time
// to the best accuracy and where the memory went; `--bench` times training steps on
// synthetic data instead (bench.cpp). Under mpirun (or --distributed) it trains
// data-parallel (examples/common/distributed_run.h): each rank on its shard of the
// training set, batch norm normalising each rank's own batch (no SyncBatchNorm, as
// PyTorch's DDP by default), the accuracy over the whole test set.
//
// NOTE: the model takes one input channel: Fashion-MNIST is grayscale, and copying it into
// three channels would triple the first convolution's input and the batches' memory
// without adding information. Images are centred on a 32x32 canvas (the size the
// small-image stem and CIFAR-style training are tuned for), padded with black.
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command
// line (printed as one line, before any work).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <memgrad/core/determinism.h>
#include <memgrad/autograd/anomaly_mode.h>
#include <memgrad/autograd/side_stream.h>
#include <memgrad/core/error.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/memory/step_cost.h>
#include <memgrad/core/memory_format.h>
#include <memgrad/core/random.h>
#include <memgrad/cuda/cuda.h>
#ifdef MG_WITH_CUDA
#include <memgrad/cuda/cudnn/settings.h>
#include <memgrad/cuda/runtime.h>
#endif
#include <memgrad/data/dataloader.h>
#include <memgrad/data/mnist_dataset.h>
#include <memgrad/data/transforms.h>
#include "examples/common/accumulation.h"
#include "examples/common/auto_accumulation.h"
#include "examples/common/block_checkpoint_flag.h"
#include "examples/common/budget_plan.h"
#include "examples/common/cli.h"
#include "examples/common/distributed_run.h"
#include "examples/common/init_from.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/memory_report.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/summary.h"
#include "examples/common/training.h"
#include "examples/resnet/args.h"
#include "examples/resnet/bench.h"
#include "examples/resnet/checkpoint.h"
#include "examples/common/optimizer_state.h"
#include "examples/resnet/optimizer.h"
#include <memgrad/nn/init.h>
#include <memgrad/nn/resnet.h>
#include <memgrad/optim/scheduler.h>

namespace {

using Clock = std::chrono::steady_clock;
using resnet::Args;
using resnet::RunProgress;

constexpr int64_t kImageSize = 32;
const std::string kModelName = "resnet18";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Pads (and with --augment, crops and flips) a host batch, then moves it to the device.
// NOTE: the augmentation's engine is seeded from (seed, epoch), so a resumed run draws
// the same crops and flips as an uninterrupted one; and from the rank on ranks other than
// 0 (rank 0 draws what one process draws), so ranks crop and flip independently.
class BatchPreparer {
 public:
  BatchPreparer(const Args& args, float black, int rank = 0) : args_(args), rank_(rank) {
    options_.size = kImageSize;
    options_.fill = black;
  }
  void start_epoch(int64_t epoch, bool augment) {
    options_.crop_padding = augment ? 4 : 0;
    options_.horizontal_flip = augment;
    std::vector<uint32_t> keys = {static_cast<uint32_t>(args_.seed), static_cast<uint32_t>(args_.seed >> 32),
                                  static_cast<uint32_t>(epoch)};
    if (rank_ > 0) keys.push_back(static_cast<uint32_t>(rank_));
    std::seed_seq seeds(keys.begin(), keys.end());
    engine_.seed(seeds);
  }
  mg::data::Batch operator()(const mg::data::Batch& batch) {
    mg::Tensor images = mg::data::augment(batch.inputs, options_, engine_);  // (B, 1, 32, 32)
    images.set_memory_category(mg::MemoryCategory::Input);
    mg::data::Batch prepared{images, batch.targets};
    if (args_.device.is_cuda()) {
      // Pinned, so that the copy does not wait for the GPU to finish the previous step.
      prepared = {images.pin_memory().to(args_.device, /*non_blocking=*/true),
                  batch.targets.pin_memory().to(args_.device, /*non_blocking=*/true)};
    } else if (args_.device.is_simulated()) {  // --predict-memory
      prepared = {images.to(args_.device), batch.targets.to(args_.device)};
    }
    if (args_.channels_last) prepared.inputs = prepared.inputs.contiguous(mg::MemoryFormat::ChannelsLast);
    return prepared;
  }

 private:
  const Args& args_;
  int rank_;
  mg::data::AugmentOptions options_;
  std::mt19937_64 engine_;
};

// What this invocation measured, beside the run's progress (which spans resumed runs).
struct SessionFacts {
  int64_t parameters = 0;
  int64_t samples_per_epoch = 0;
  int64_t resumed_from = 0;   // epochs done before this invocation
  double train_seconds = 0;   // training only (no evaluation), this invocation
  int64_t train_samples = 0;  // this invocation
};

// The run's set-up, as a summary and a prediction both begin.
void write_setup(mg::JsonWriter& json, const Args& args, int64_t batch_size) {
  json.key("model").value(kModelName)
      .key("dataset").value(args.data_dir)
      .key("device").value(args.device.str())
      .key("optimizer").value(resnet::optimizer_name(args))
      .key("optimizer_state").value(examples::optimizer_state_name(args.optimizer_state))
      .key("memory_format").value(args.channels_last ? "channels_last" : "contiguous")
      .key("amp").value(examples::amp_name(args.amp))
      .key("batch_size").value(batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(mg::nn::block_checkpoint_name(args.checkpoint));
}

void write_summary(const Args& args, const RunProgress& progress, const SessionFacts& facts,
                   const examples::DistributedRun& run, const std::vector<mg::memory::Snapshot>& peaks) {
  mg::JsonWriter json;
  json.begin_object();
  write_setup(json, args, args.batch_size);
  json.key("ranks").value(static_cast<int64_t>(run.size()))
      .key("zero").value(args.zero)
      .key("schedule").value("onecycle")
      .key("lr").value(args.lr)
      .key("augment").value(args.augment)
      .key("epochs").value(args.epochs)
      .key("train_samples_per_epoch").value(facts.samples_per_epoch)
      .key("resumed_from_epoch").value(facts.resumed_from)
      .key("test_accuracy").value(progress.test_accuracy.empty() ? 0.0 : progress.test_accuracy.back())
      .key("best_test_accuracy").value(progress.best_accuracy)
      .key("best_epoch").value(progress.best_epoch)
      .key("seconds_to_best").value(progress.seconds_to_best)
      .key("seconds").value(progress.seconds)
      .key("test_accuracy_per_epoch").begin_array();
  for (double accuracy : progress.test_accuracy) json.value(accuracy);
  json.end_array().key("seconds_per_epoch").begin_array();
  for (double seconds : progress.seconds_per_epoch) json.value(seconds);
  json.end_array()
      .key("samples_per_s").value(facts.train_seconds > 0 ? facts.train_samples / facts.train_seconds : 0.0)
      .key("parameters").value(facts.parameters)
      .key("memory");
  mg::memory::write_json(json, mg::memory::snapshot(args.device));
  examples::write_peaks_by_rank(json, peaks);
  json.end_object();
  examples::write_file_atomically(args.summary_json, json.str());
}

// ResNet-18 for one-channel 32x32 images, initialised from --seed, on `device`.
std::shared_ptr<mg::nn::ResNet> build_model(const Args& args, int64_t classes, mg::Device device) {
  mg::Generator init_generator(args.seed);
  std::shared_ptr<mg::nn::ResNet> model = mg::nn::resnet18({.num_classes = classes,
                                                            .small_image_stem = true,
                                                            .in_channels = 1,
                                                            .generator = &init_generator,
                                                            .checkpoint_stages = args.checkpoint});
  model->to(device);
  if (args.channels_last) model->to(mg::MemoryFormat::ChannelsLast);
  return model;
}

int run_training(const Args& command_line) {
  examples::DistributedRun distributed = examples::DistributedRun::start(command_line.distributed, command_line.device);
  Args args = command_line;
  args.device = distributed.device();  // this rank's GPU
  if (args.threads) examples::set_cpu_threads(*args.threads);
  examples::apply_memory_cap(args.out_of_memory, args.device);
  if (!args.init_from.empty()) examples::check_initial_weights(args.init_from, kModelName);
  examples::MemoryTimeline memory_timeline(
      distributed.is_main() ? args.memory_recording : examples::MemoryRecordingFiles{}, args.device);
  mg::manual_seed(distributed.rank_seed(args.seed));

  // NOTE: 10 classes (Fashion-MNIST's): a label outside [0, 10) is an error naming the
  // labels file and the sample, before any training step.
  const mg::data::MnistDataset train_set(args.data_dir, mg::data::Split::Train);
  const mg::data::MnistDataset test_set(args.data_dir, mg::data::Split::Test, {.normalization = train_set.normalization()});
  const mg::Shape image_shape = train_set.image_shape();
  MG_CHECK(image_shape[0] <= kImageSize && image_shape[1] <= kImageSize, "the images in '", args.data_dir,
           "' are ", image_shape[0], "x", image_shape[1], "; this program pads them to ", kImageSize, "x",
           kImageSize, " and cannot take larger ones.");
  // Batches are built on the host (augmentation runs there); on a GPU a background thread
  // builds them two ahead.
  const int prefetch = args.device.is_cuda() ? 2 : 0;
  // Each rank its shard of the training set; the test samples (about --limit of them)
  // shared out among the ranks, each evaluated once.
  mg::data::DataLoader train_loader(
      train_set, distributed.training_shard(
                     {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .prefetch = prefetch},
                     train_set.size()));
  mg::data::DataLoader test_loader(
      test_set, distributed.evaluation_shard({.batch_size = args.batch_size, .prefetch = prefetch},
                                             distributed.limited_samples(test_set.size(), args.batch_size, args.limit)));
  const mg::data::Normalization& normalization = train_set.normalization();
  BatchPreparer prepare(args, static_cast<float>(-normalization.mean / normalization.std), distributed.rank());

  const int64_t classes = train_set.num_classes();
  std::shared_ptr<mg::nn::ResNet> model = build_model(args, classes, args.device);
  if (!args.init_from.empty()) examples::load_initial_weights(args.init_from, kModelName, *model);
  std::shared_ptr<mg::nn::Module> trained = distributed.wrap(model);  // DDP when distributed
  std::unique_ptr<mg::optim::Optimizer> optimizer =
      resnet::make_optimizer(distributed, *model, args);
  examples::MixedPrecision precision(args.amp, args.device);
  // NOTE: --limit counts samples over all ranks, in global batches; with the same global
  // batch, an epoch has the same steps on any number of ranks.
  const int64_t train_batches =
      examples::batches_per_epoch(train_loader, args.batch_size * distributed.size(), args.limit);
  const int64_t train_steps = examples::optimizer_steps(train_batches, args.accum);
  mg::optim::OneCycleLR scheduler(*optimizer, args.lr, args.epochs * train_steps);

  RunProgress progress;
  progress.total_steps = args.epochs * train_steps;
  if (!args.resume_path.empty()) {
    progress = resnet::load_checkpoint(args.resume_path, kModelName, *model, *optimizer, precision, scheduler,
                                       distributed);
    MG_CHECK(progress.total_steps == args.epochs * train_steps, "checkpoint '", args.resume_path,
             "' belongs to a run of ", progress.total_steps, " steps, but this one has ", args.epochs, " epochs of ",
             train_steps, " steps. Hint: resume with the --epochs, --batch, --accum and --limit it was saved with "
             "(on another number of ranks, the same global batch: ranks x --batch).");
    MG_CHECK(progress.epochs_done <= args.epochs, "checkpoint '", args.resume_path, "' is past the run's end.");
    // The shuffling is a closed form of the epoch: setting the loader's epoch puts it
    // exactly where the saved run was (the schedule came back with the checkpoint).
    train_loader.set_epoch(progress.epochs_done);
  }
  SessionFacts facts{.parameters = model->num_parameters(),
                     .samples_per_epoch = std::min(train_batches * args.batch_size * distributed.size(), train_set.size()),
                     .resumed_from = progress.epochs_done};
  std::printf("%s on %s: %lld training and %lld test images of %lldx%lld padded to %lldx%lld, %lld classes%s\n",
              kModelName.c_str(), args.data_dir.c_str(), static_cast<long long>(train_set.size()),
              static_cast<long long>(test_set.size()), static_cast<long long>(image_shape[0]),
              static_cast<long long>(image_shape[1]), static_cast<long long>(kImageSize),
              static_cast<long long>(kImageSize), static_cast<long long>(classes),
              args.augment ? ", random crops and flips" : "");
  std::printf("%lld parameters; %s%s, one-cycle lr to %g, batch %lld%s%s%s%s, "
              "%lld epochs of %lld steps, on %s%s\n",
              static_cast<long long>(facts.parameters), args.zero ? "ZeRO-1 " : "",
              resnet::describe_optimizer(args).c_str(), args.lr,
              static_cast<long long>(args.batch_size),
              distributed.active() ? (" per rank on " + distributed.describe()).c_str() : "",
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated per step").c_str() : "",
              examples::block_checkpoint_phrase(args.checkpoint, mg::nn::ResNetOptions{}.checkpoint_policy).c_str(),
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "", static_cast<long long>(args.epochs),
              static_cast<long long>(train_steps), args.device.str().c_str(),
              facts.resumed_from > 0 ? (", resumed after epoch " + std::to_string(facts.resumed_from)).c_str()
              : args.init_from.empty() ? "" : (", starting from the weights in " + args.init_from).c_str());
  std::fflush(stdout);

  std::optional<examples::GraphedStep> graph;
  if (args.cuda_graph) graph.emplace(args.device);
  examples::AutoAccumulation auto_accum(args.out_of_memory.auto_accum);  // kept across epochs
  memory_timeline.start();
  const int64_t last_epoch = args.stop_after > 0 ? std::min(args.stop_after, args.epochs) : args.epochs;
  for (int64_t epoch = progress.epochs_done; epoch < last_epoch; ++epoch) {
    const Clock::time_point start = Clock::now();
    prepare.start_epoch(epoch, args.augment);
    const examples::EpochResult result = examples::train_epoch(
        *trained, *optimizer, train_loader, args.device,
        {.epoch = epoch,
         .epochs = args.epochs,
         .max_batches = train_batches,
         .accum = args.accum,
         .scheduler = &scheduler,
         .precision = &precision,
         .transform = std::ref(prepare),
         .memory_timeline = &memory_timeline,
         .graph = graph ? &*graph : nullptr,
         .auto_accum = args.out_of_memory.auto_accum ? &auto_accum : nullptr,
         .distributed = &distributed});
    examples::finish_optimizer_step(*optimizer);  // evaluate and save the epoch's last weights
    facts.train_seconds += seconds_since(start);
    facts.train_samples += result.samples;
    prepare.start_epoch(epoch, /*augment=*/false);
    const double accuracy = examples::evaluate(*model, test_loader, args.device, std::ref(prepare),
                                               /*max_batches=*/0, &precision, &distributed);
    const double seconds = seconds_since(start);

    progress.epochs_done = epoch + 1;
    progress.scheduler_steps += result.steps;
    progress.seconds += seconds;
    progress.test_accuracy.push_back(accuracy);
    progress.seconds_per_epoch.push_back(seconds);
    if (accuracy > progress.best_accuracy) {
      progress.best_accuracy = accuracy;
      progress.best_epoch = epoch + 1;
      progress.seconds_to_best = progress.seconds;
    }
    std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, lr %.4g, %.1f s (%.0f samples/s)\n",
                static_cast<long long>(epoch + 1), result.mean_loss, 100.0 * accuracy, scheduler.last_lr(), seconds,
                result.samples / seconds_since(start));
    if (!args.save_path.empty()) {
      // NOTE: every rank takes part (ZeRO-1 consolidates its state on rank 0), rank 0 writes.
      const std::optional<mg::optim::OptimizerStateDict> optimizer_state = examples::checkpoint_state(*optimizer);
      distributed.on_main("write the checkpoint " + args.save_path, [&] {
        resnet::save_checkpoint(args.save_path, kModelName, *model, *optimizer_state, precision, scheduler, progress);
      });
    }
    std::fflush(stdout);
  }
  memory_timeline.finish();

  examples::print_memory_report(
      stdout, args.device,
      {.parameter = "weights, biases and BatchNorm statistics",
       .optimizer_state = resnet::optimizer_state_meaning(args),
       .input = "dataset and batches"});
  const std::vector<mg::memory::Snapshot> peaks = distributed.peaks_by_rank();  // every rank joins
  if (distributed.active()) examples::print_peaks_by_rank(stdout, peaks);
  std::printf("%s: test accuracy %.2f%% after %lld of %lld epochs; best %.2f%% (epoch %lld, %.1f s into the run)\n",
              kModelName.c_str(), 100.0 * (progress.test_accuracy.empty() ? 0.0 : progress.test_accuracy.back()),
              static_cast<long long>(progress.epochs_done), static_cast<long long>(args.epochs),
              100.0 * progress.best_accuracy,
              static_cast<long long>(progress.best_epoch), progress.seconds_to_best);
  if (!args.summary_json.empty()) {
    distributed.on_main("write " + args.summary_json, [&] { write_summary(args, progress, facts, distributed, peaks); });
    std::printf("summary written to %s\n", args.summary_json.c_str());
  }
  return 0;
}

// The first optimizer steps of an epoch (examples::kPredictedSteps) and one evaluation
// batch, as run_training runs them, with the model and batches on the (simulated) device;
// with a group, as that rank of --distributed (DDP, ZeRO-1 SGD with --zero, the rank's
// shards). A training run's peak spans the whole run; from the second step on every step
// repeats the same allocations. With `cost`, the training steps' cost (memory/step_cost.h's
// H100 rates), per step. `args` and the datasets must outlive the steps.
examples::DistributedStepsOnDevice predicted_training(const Args& args, const mg::data::MnistDataset& train_set,
                                                      const mg::data::MnistDataset& test_set,
                                                      mg::memory::StepCost* cost) {
  return [&args, &train_set, &test_set, cost](mg::Device device, int64_t batch_size,
                                              const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
    const mg::data::Normalization& normalization = train_set.normalization();
    examples::DistributedRun distributed(device, group);
    Args on_device = args;
    on_device.device = device;
    on_device.batch_size = batch_size;
    mg::manual_seed(args.seed);
    // On the CPU the datasets live in the memory the model trains in.
    const std::vector<mg::Tensor> datasets =
        args.device.is_cpu() ? examples::placeholders_on(device, {train_set.images(), train_set.labels(),
                                                                  test_set.images(), test_set.labels()})
                             : std::vector<mg::Tensor>{};
    // Batches are built on the host and moved to `device` by the preparer, as in training;
    // on a GPU the prefetched ones wait in pinned host memory.
    mg::data::DataLoader train_loader(
        train_set, distributed.training_shard({.batch_size = batch_size, .shuffle = true, .seed = args.seed},
                                              train_set.size()));
    mg::data::DataLoader test_loader(
        test_set, distributed.evaluation_shard({.batch_size = batch_size},
                                               distributed.limited_samples(test_set.size(), batch_size, args.limit)));
    BatchPreparer prepare(on_device, static_cast<float>(-normalization.mean / normalization.std), distributed.rank());
    std::shared_ptr<mg::nn::ResNet> model = build_model(on_device, train_set.num_classes(), device);
    std::shared_ptr<mg::nn::Module> trained = distributed.wrap(model);  // DDP when distributed
    std::unique_ptr<mg::optim::Optimizer> optimizer =
        resnet::make_optimizer(distributed, *model, args);
    examples::MixedPrecision precision(args.amp, device);
    prepare.start_epoch(0, args.augment);
    const int64_t train_batches =
        examples::batches_per_epoch(train_loader, batch_size * distributed.size(), args.limit);
    const int64_t batches = std::min(train_batches, examples::kPredictedSteps * args.accum);
    std::optional<mg::memory::StepCostMeter> meter;
    if (cost) meter.emplace(mg::memory::DeviceRates::h100());
    examples::train_epoch(*trained, *optimizer, train_loader, device,
                          {.max_batches = batches,
                           .accum = args.accum,
                           .precision = &precision,
                           .transform = std::ref(prepare),
                           .show_progress = false,
                           .distributed = &distributed});
    if (cost) *cost = meter->cost().per_step((batches + args.accum - 1) / args.accum);
    meter.reset();
    prepare.start_epoch(0, /*augment=*/false);
    // NOTE: not summed over the ranks: the simulated device holds no counts.
    examples::evaluate(*model, test_loader, device, std::ref(prepare), /*max_batches=*/1, &precision);
    return mg::memory::snapshot(device);
  };
}

// --memory-budget for a training run (examples/common/budget_plan.h): `args` with the levers
// of the fastest plan whose predicted run (predicted_training's steps and evaluation) fits.
Args plan_training_for_budget(const Args& args) {
  const mg::data::MnistDataset train_set(args.data_dir, mg::data::Split::Train);
  const mg::data::MnistDataset test_set(args.data_dir, mg::data::Split::Test, {.normalization = train_set.normalization()});
  int64_t parameters = 0;
  {
    const mg::nn::init::SkipInitGuard no_values;
    parameters = build_model(args, train_set.num_classes(), mg::Device::cpu())->num_parameters();
  }
  return examples::plan_levers<Args>(
      args, resnet::budget_problem(args, parameters),
      [&](const Args& planned, mg::Device device, mg::memory::StepCost* cost) {
        return predicted_training(planned, train_set, test_set, cost)(device, planned.batch_size, nullptr);
      });
}

// --predict-memory / --fit-batch without --bench: predicted_training's peaks for --device,
// per rank with --distributed.
int predict_training_memory(const Args& args) {
  if (args.threads) examples::set_cpu_threads(*args.threads);
  // NOTE: 10 classes (Fashion-MNIST's): a label outside [0, 10) is an error naming the
  // labels file and the sample, before any training step.
  const mg::data::MnistDataset train_set(args.data_dir, mg::data::Split::Train);
  const mg::data::MnistDataset test_set(args.data_dir, mg::data::Split::Test, {.normalization = train_set.normalization()});
  const examples::DistributedStepsOnDevice steps = predicted_training(args, train_set, test_set, /*cost=*/nullptr);
  const std::optional<examples::DistributedPrediction> per_rank =
      examples::distributed_prediction(args.distributed, args.world_size, args.zero);
  const examples::MemoryPrediction prediction =
      examples::predict_or_fit(args.device, args.batch_size, args.fit_batch, per_rank, steps,
                               examples::largest_batch_per_rank(train_set.size(), per_rank));
  std::printf("%s training on %s with %s%s, batch %lld%s%s%s%s%s\n", kModelName.c_str(), args.data_dir.c_str(),
              args.zero ? "ZeRO-1 " : "", resnet::describe_optimizer(args).c_str(),
              static_cast<long long>(prediction.batch_size),
              examples::per_rank_phrase(per_rank).c_str(),
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "",
              examples::block_checkpoint_phrase(args.checkpoint, mg::nn::ResNetOptions{}.checkpoint_policy).c_str(),
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "",
              args.channels_last ? ", channels-last" : "");
  examples::print_prediction(stdout, prediction, args.fit_batch);
  if (!args.summary_json.empty()) {
    examples::write_prediction_summary(args.summary_json, prediction, args.fit_batch, [&](mg::JsonWriter& json) {
      write_setup(json, args, prediction.batch_size);
    });
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "resnet",
      [&](int count, char** values) {
        args = resnet::parse_args(count, values);
        return !args.help;
      },
      resnet::usage, [&] {
        const mg::autograd::DetectAnomalyGuard detect_anomaly(args.detect_anomaly);
        mg::set_deterministic_algorithms(args.deterministic);
#ifdef MG_WITH_CUDA
        mg::cuda::set_cudnn_fusion(args.cudnn_fusion);
        mg::cuda::set_cudnn_backward_fusion(args.cudnn_backward_fusion);
        mg::cuda::set_cudnn_benchmark(args.cudnn_benchmark);
#endif
        mg::cuda::set_dependent_launch(args.dependent_launch);
        mg::autograd::set_weight_gradients_on_side_stream(args.wgrad_stream);
#ifdef MG_WITH_CUDA
        // NOTE: the side stream gains little unless the device prefers the main stream's
        // kernels: at equal priority the weight gradients take the SMs that the next batch
        // norm's blocks are waiting for (ResNet-18 b256: 2% faster; with the main stream at
        // the highest priority, 9%). The legacy default stream has the lowest priority.
        std::optional<mg::cuda::Stream> high_priority;
        std::optional<mg::cuda::StreamGuard> on_high_priority;
        if (args.wgrad_stream) {
          high_priority.emplace(args.device, mg::cuda::StreamPriority::High);
          on_high_priority.emplace(*high_priority);
        }
#endif
        const bool predict = args.predict_memory || args.fit_batch.has_value();
        if (predict && args.wgrad_stream) {
          std::fprintf(stderr, "resnet: the prediction models one stream; with --wgrad-stream the side stream also "
                               "reserves blocks of its own (its weight gradients, cuDNN workspaces), and the peak of "
                               "allocated bytes may differ by a few blocks\n");
        }
        if (args.bench) {
          const resnet::Args planned = args.budget.budget_bytes ? resnet::plan_bench_for_budget(args) : args;
          return predict ? resnet::predict_bench_memory(planned) : resnet::run_bench(planned);
        }
        const resnet::Args planned = args.budget.budget_bytes ? plan_training_for_budget(args) : args;
        return predict ? predict_training_memory(planned) : run_training(planned);
      });
}
