// examples/mnist/main.cpp — trains an MLP or PyTorch's MNIST example CNN on an MNIST-format
// dataset (Fashion-MNIST by default), evaluates it after every epoch, and ends with where
// the memory went: bytes by category (parameters, gradients, optimizer state, activations,
// inputs, ...), current and peak. `--summary-json FILE` writes the same facts for scripts;
// `--save FILE` a checkpoint after every epoch, which `--init-from FILE` starts a new run
// from (examples/common/init_from.h).
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
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/random.h>
#include <memgrad/data/dataloader.h>
#include <memgrad/data/mnist_dataset.h>
#include "examples/common/accumulation.h"
#include "examples/common/auto_accumulation.h"
#include "examples/common/cli.h"
#include "examples/common/distributed_run.h"
#include "examples/common/init_from.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/memory_report.h"
#include "examples/common/memory_timeline.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/run_checkpoint.h"
#include "examples/common/summary.h"
#include "examples/common/training.h"
#include "examples/mnist/args.h"
#include <memgrad/nn/nn.h>
#include <memgrad/optim/optim.h>

namespace {

using Clock = std::chrono::steady_clock;
using mnist::Args;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// (B, pixels) -> 512 -> 256 -> (B, classes), initialised from `generator`.
std::shared_ptr<mg::nn::Module> build_mlp(int64_t pixels, int64_t classes,
                                          mg::Generator& generator) {
  using namespace mg::nn;
  return std::make_shared<Sequential>(
      std::make_shared<Linear>(pixels, 512, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(512, 256, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, classes, true, &generator));
}

// The model's name in a checkpoint's metadata: a checkpoint of the other model is refused.
std::string model_name(const Args& args) { return "mnist-" + args.model; }

// --model's network, initialised from --seed, on `device`.
std::shared_ptr<mg::nn::Module> build_model(const Args& args, const mg::Shape& image_shape, int64_t classes,
                                            mg::Device device) {
  mg::Generator init_generator(args.seed);
  std::shared_ptr<mg::nn::Module> model =
      args.model == "cnn"
          ? std::make_shared<mg::nn::MnistCnn>(image_shape, classes, &init_generator, args.checkpoint)
          : build_mlp(image_shape.numel(), classes, init_generator);
  model->to(device);
  return model;
}

// --optim over `params`; with --zero, as ZeRO-1 over the run's ranks.
std::unique_ptr<mg::optim::Optimizer> make_optimizer(const Args& args, const std::vector<mg::Tensor>& params,
                                                     const examples::DistributedRun& run) {
  using namespace mg::optim;
  if (args.optimizer == "sgd") return run.make_optimizer<SGD>(params, SGDOptions{.lr = args.lr, .momentum = 0.9}, args.zero);
  if (args.optimizer == "adam") return run.make_optimizer<Adam>(params, AdamOptions{.lr = args.lr}, args.zero);
  if (args.optimizer == "adamw") return run.make_optimizer<AdamW>(params, AdamWOptions{.lr = args.lr}, args.zero);
  return run.make_optimizer<Adagrad>(params, AdagradOptions{.lr = args.lr}, args.zero);
}

// On a GPU, batches are built in pinned memory two ahead by a background thread, so the
// GPU need not wait for the host to gather and copy the next one.
int prefetched_batches(mg::Device device) { return device.is_cuda() ? 2 : 0; }

// One split of --data, as the model takes its images: flat (H*W) rows for the MLP,
// (1, H, W) for the CNN; the test split normalised as `train` is.
// NOTE: 10 classes (MNIST's and Fashion-MNIST's): a label outside [0, 10) is an error
// naming the labels file and the sample, before any training step.
mg::data::MnistDataset load_split(const Args& args, mg::data::Split split, const mg::data::MnistDataset* train = nullptr) {
  return mg::data::MnistDataset(
      args.data_dir, split,
      {.normalization = train != nullptr ? std::optional(train->normalization()) : std::nullopt,
       .flatten = args.model == "mlp"});
}

// The loader of the training split (shuffled) or of the test split, yielding batches on `device`.
mg::data::DataLoaderOptions loader_options(const Args& args, mg::Device device, int64_t batch_size, bool train) {
  const bool on_gpu = device.is_cuda();
  return {.batch_size = batch_size,
          .shuffle = train,
          .seed = train ? args.seed : 0,
          .device = device,
          .pin_memory = on_gpu,
          .prefetch = prefetched_batches(device)};
}

struct RunResult {
  double test_accuracy = 0;
  double final_train_loss = 0;
  double train_seconds = 0;
  int64_t train_samples = 0;
  std::vector<double> seconds_per_epoch;
  int64_t parameters = 0;
};

double total(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum;
}

// The run's set-up, as a summary and a prediction both begin.
void write_setup(mg::JsonWriter& json, const Args& args, int64_t batch_size) {
  json.key("model").value(args.model)
      .key("dataset").value(args.data_dir)
      .key("device").value(args.device.str())
      .key("optimizer").value(args.optimizer)
      .key("batch_size").value(batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(args.checkpoint)
      .key("amp").value(examples::amp_name(args.amp));
}

void write_summary(const std::string& path, const Args& args, const RunResult& result,
                   const examples::DistributedRun& run, const std::vector<mg::memory::Snapshot>& peaks) {
  mg::JsonWriter json;
  json.begin_object();
  write_setup(json, args, args.batch_size);
  json.key("ranks").value(static_cast<int64_t>(run.size()))
      .key("zero").value(args.zero)
      .key("schedule").value(args.schedule)
      .key("epochs").value(args.epochs)
      .key("test_accuracy").value(result.test_accuracy)
      .key("final_train_loss").value(result.final_train_loss)
      .key("seconds").value(total(result.seconds_per_epoch))
      .key("seconds_per_epoch").begin_array();
  for (double seconds : result.seconds_per_epoch) json.value(seconds);
  json.end_array()
      .key("samples_per_s").value(result.train_samples / result.train_seconds)
      .key("parameters").value(result.parameters)
      .key("memory");
  mg::memory::write_json(json, mg::memory::snapshot(args.device));
  examples::write_peaks_by_rank(json, peaks);
  json.end_object();
  examples::write_file_atomically(path, json.str());
}

int run(const Args& command_line) {
  examples::DistributedRun distributed = examples::DistributedRun::start(command_line.distributed, command_line.device);
  Args args = command_line;
  args.device = distributed.device();  // this rank's GPU
  if (args.threads) examples::set_cpu_threads(*args.threads);
  examples::apply_memory_cap(args.out_of_memory, args.device);
  if (!args.init_from.empty()) examples::check_initial_weights(args.init_from, model_name(args));
  examples::MemoryTimeline memory_timeline(
      distributed.is_main() ? args.memory_recording : examples::MemoryRecordingFiles{}, args.device);
  mg::manual_seed(distributed.rank_seed(args.seed));  // dropout: other masks on every rank

  // NOTE: the test split is normalised with the training split's pixel statistics: a
  // model in use sees inputs normalised the way it was trained.
  const mg::data::MnistDataset train_set = load_split(args, mg::data::Split::Train);
  const mg::data::MnistDataset test_set = load_split(args, mg::data::Split::Test, &train_set);
  // Each rank its shard of the training set; the test samples (about --limit of them)
  // shared out among the ranks, each evaluated once.
  mg::data::DataLoader train_loader(
      train_set, distributed.training_shard(loader_options(args, args.device, args.batch_size, /*train=*/true),
                                            train_set.size()));
  mg::data::DataLoader test_loader(
      test_set, distributed.evaluation_shard(loader_options(args, args.device, args.batch_size, /*train=*/false),
                                             distributed.limited_samples(test_set.size(), args.batch_size, args.limit)));

  const mg::Shape image_shape = train_set.image_shape();
  const int64_t classes = train_set.num_classes();
  std::shared_ptr<mg::nn::Module> model = build_model(args, image_shape, classes, args.device);
  if (!args.init_from.empty()) examples::load_initial_weights(args.init_from, model_name(args), *model);
  std::shared_ptr<mg::nn::Module> trained = distributed.wrap(model);  // DDP when distributed
  std::unique_ptr<mg::optim::Optimizer> optimizer = make_optimizer(args, trained->parameters(), distributed);
  // NOTE: --limit counts samples over all ranks, in global batches.
  const int64_t train_batches =
      examples::batches_per_epoch(train_loader, args.batch_size * distributed.size(), args.limit);
  // cosine: the learning rate falls from --lr to 0 along a half cosine over all steps
  // (annealing lets a few epochs settle into a better minimum).
  std::unique_ptr<mg::optim::LRScheduler> scheduler;
  if (args.schedule == "cosine") {
    scheduler = std::make_unique<mg::optim::CosineAnnealingLR>(
        *optimizer, args.epochs * examples::optimizer_steps(train_batches, args.accum));
  }

  examples::MixedPrecision precision(args.amp, args.device);
  RunResult result;
  result.parameters = model->num_parameters();
  std::printf("%s on %s: %lld training and %lld test images of %lldx%lld, %lld classes\n",
              args.model.c_str(), args.data_dir.c_str(), static_cast<long long>(train_set.size()),
              static_cast<long long>(test_set.size()), static_cast<long long>(image_shape[0]),
              static_cast<long long>(image_shape[1]), static_cast<long long>(classes));
  std::printf("%lld parameters; %s%s, lr %g, batch %lld%s%s%s%s, %lld epochs, on %s\n",
              static_cast<long long>(result.parameters), args.zero ? "ZeRO-1 " : "", args.optimizer.c_str(), args.lr,
              static_cast<long long>(args.batch_size),
              distributed.active() ? (" per rank on " + distributed.describe()).c_str() : "",
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated per step").c_str() : "",
              args.checkpoint ? ", convolutions checkpointed" : "",
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "", static_cast<long long>(args.epochs),
              args.device.str().c_str());
  if (!args.init_from.empty()) std::printf("starting from the weights in %s\n", args.init_from.c_str());
  std::fflush(stdout);

  std::optional<examples::GraphedStep> graph;
  if (args.cuda_graph) graph.emplace(args.device);
  examples::AutoAccumulation auto_accum(args.out_of_memory.auto_accum);  // kept across epochs
  memory_timeline.start();
  int64_t steps_done = 0;
  for (int64_t epoch = 0; epoch < args.epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    const examples::EpochResult epoch_result = examples::train_epoch(
        *trained, *optimizer, train_loader, args.device,
        {.epoch = epoch,
         .epochs = args.epochs,
         .max_batches = train_batches,
         .accum = args.accum,
         .scheduler = scheduler.get(),
         .precision = &precision,
         .transform = {},
         .memory_timeline = &memory_timeline,
         .graph = graph ? &*graph : nullptr,
         .auto_accum = args.out_of_memory.auto_accum ? &auto_accum : nullptr,
         .distributed = &distributed});
    result.final_train_loss = epoch_result.mean_loss;
    const double train_seconds = seconds_since(start);
    result.test_accuracy = examples::evaluate(*model, test_loader, args.device, {}, /*max_batches=*/0, &precision,
                                              &distributed);
    result.seconds_per_epoch.push_back(seconds_since(start));
    result.train_seconds += train_seconds;
    result.train_samples += epoch_result.samples;
    std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.1f s (%.0f samples/s)\n",
                static_cast<long long>(epoch + 1), result.final_train_loss,
                100.0 * result.test_accuracy, result.seconds_per_epoch.back(),
                epoch_result.samples / train_seconds);
    steps_done += epoch_result.steps;
    if (!args.save_path.empty()) {
      // NOTE: every rank takes part (ZeRO-1 consolidates its state on rank 0), rank 0 writes.
      const std::optional<mg::optim::OptimizerStateDict> optimizer_state = examples::checkpoint_state(*optimizer);
      distributed.on_main("write the checkpoint " + args.save_path, [&] {
        examples::save_run_checkpoint(args.save_path, model_name(args), precision,
                                      {.model = model.get(),
                                       .optimizer_state = &*optimizer_state,
                                       .scheduler = scheduler.get(),
                                       .step = steps_done,
                                       .epoch = epoch + 1,
                                       .tensors = {{"test_accuracy", examples::run_real(result.test_accuracy)}}});
      });
    }
    std::fflush(stdout);
  }
  memory_timeline.finish();

  examples::print_memory_report(stdout, args.device,
                                {.parameter = "weights and biases",
                                 .optimizer_state = args.optimizer + "'s moments/counters" +
                                                    (args.zero ? " (this rank's shard)" : ""),
                                 .input = "dataset and batches"});
  const std::vector<mg::memory::Snapshot> peaks = distributed.peaks_by_rank();  // every rank joins
  if (distributed.active()) examples::print_peaks_by_rank(stdout, peaks);
  std::printf("%s: %lld parameters, test accuracy %.2f%% after %lld epochs, %.1f s\n",
              args.model.c_str(), static_cast<long long>(result.parameters),
              100.0 * result.test_accuracy, static_cast<long long>(args.epochs),
              total(result.seconds_per_epoch));
  if (!args.summary_json.empty()) {
    distributed.on_main("write " + args.summary_json,
                        [&] { write_summary(args.summary_json, args, result, distributed, peaks); });
    std::printf("summary written to %s\n", args.summary_json.c_str());
  }
  return 0;
}

// --predict-memory / --fit-batch: the first optimizer steps of an epoch
// (examples::kPredictedSteps) and one evaluation batch, as run() runs them, with the
// model and batches on the simulated device; with --distributed as rank 0 of
// --world-size ranks (DDP, the optimizer ZeRO-1 with --zero, the rank's shards). A
// training run's peak spans the whole run; from the second step on every step repeats the
// same allocations.
int predict(const Args& args) {
  if (args.threads) examples::set_cpu_threads(*args.threads);
  const mg::data::MnistDataset train_set = load_split(args, mg::data::Split::Train);
  const mg::data::MnistDataset test_set = load_split(args, mg::data::Split::Test, &train_set);
  const mg::Shape image_shape = train_set.image_shape();
  const int64_t classes = train_set.num_classes();
  const examples::DistributedStepsOnDevice steps = [&](mg::Device device, int64_t batch_size,
                                                       const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
    examples::DistributedRun distributed(device, group);
    mg::manual_seed(args.seed);
    // On the CPU the datasets live in the memory the model trains in.
    const std::vector<mg::Tensor> datasets =
        args.device.is_cpu() ? examples::placeholders_on(device, {train_set.images(), train_set.labels(),
                                                                  test_set.images(), test_set.labels()})
                             : std::vector<mg::Tensor>{};
    mg::data::DataLoader train_loader(
        train_set, distributed.training_shard(loader_options(args, device, batch_size, /*train=*/true), train_set.size()));
    mg::data::DataLoader test_loader(
        test_set, distributed.evaluation_shard(loader_options(args, device, batch_size, /*train=*/false),
                                               distributed.limited_samples(test_set.size(), batch_size, args.limit)));
    std::shared_ptr<mg::nn::Module> model = build_model(args, image_shape, classes, device);
    std::shared_ptr<mg::nn::Module> trained = distributed.wrap(model);  // DDP when distributed
    std::unique_ptr<mg::optim::Optimizer> optimizer = make_optimizer(args, trained->parameters(), distributed);
    // NOTE: the simulated loader builds each batch when asked; on a GPU the loader's
    // thread keeps prefetched_batches() more on the device from the epoch's start, which a
    // queue kept full here stands for (a GPU run waits for the GPU, not for the host).
    std::vector<mg::Tensor> prefetch_queue;
    for (int i = 0; i < prefetched_batches(args.device); ++i) {
      const mg::Shape input_shape = args.model == "mlp" ? mg::Shape{batch_size, image_shape.numel()}
                                                        : mg::Shape{batch_size, 1, image_shape[0], image_shape[1]};
      prefetch_queue.push_back(mg::empty(input_shape, {.device = device, .category = mg::MemoryCategory::Input}));
      prefetch_queue.push_back(
          mg::empty({batch_size}, {.dtype = mg::DType::Int64, .device = device, .category = mg::MemoryCategory::Input}));
    }
    examples::MixedPrecision precision(args.amp, device);
    const int64_t train_batches =
        examples::batches_per_epoch(train_loader, batch_size * distributed.size(), args.limit);
    examples::train_epoch(*trained, *optimizer, train_loader, device,
                          {.max_batches = std::min(train_batches, examples::kPredictedSteps * args.accum),
                           .accum = args.accum,
                           .precision = &precision,
                           .transform = {},
                           .show_progress = false,
                           .distributed = &distributed});
    // NOTE: the evaluation's count is not summed over the ranks here: the simulated device
    // holds no values, and the sum's 16 bytes come after training's peak.
    examples::evaluate(*model, test_loader, device, {}, /*max_batches=*/1, &precision);
    return mg::memory::snapshot(device);
  };
  const std::optional<examples::DistributedPrediction> per_rank =
      examples::distributed_prediction(args.distributed, args.world_size, args.zero);
  const examples::MemoryPrediction prediction =
      examples::predict_or_fit(args.device, args.batch_size, args.fit_batch, per_rank, steps,
                               examples::largest_batch_per_rank(train_set.size(), per_rank));
  std::printf("%s training on %s with %s%s, batch %lld%s%s%s%s\n", args.model.c_str(), args.data_dir.c_str(),
              args.zero ? "ZeRO-1 " : "", args.optimizer.c_str(), static_cast<long long>(prediction.batch_size),
              examples::per_rank_phrase(per_rank).c_str(),
              args.accum > 1 ? (" x " + std::to_string(args.accum) + " accumulated").c_str() : "",
              args.checkpoint ? ", convolutions checkpointed" : "",
              args.amp ? (", autocast " + examples::amp_name(args.amp)).c_str() : "");
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
      argc, argv, "mnist",
      [&](int count, char** values) {
        args = mnist::parse_args(count, values);
        return !args.help;
      },
      mnist::usage, [&] {
        const mg::autograd::DetectAnomalyGuard detect_anomaly(args.detect_anomaly);
        mg::set_deterministic_algorithms(args.deterministic);
        return args.predict_memory || args.fit_batch ? predict(args) : run(args);
      });
}
