// examples/mnist/main.cpp — trains an MLP on an MNIST-format dataset (Fashion-MNIST by
// default), evaluates it after every epoch, and ends with where the memory went: bytes by
// category (parameters, gradients, optimizer state, activations, inputs, ...), current and
// peak. `--summary-json FILE` writes the same facts for scripts and benchmarks.
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command
// line (printed with the usage).
#include <cmath>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/loss.h"
#include "autograd/reduce.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/memory.h"
#include "core/random.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "examples/mnist/args.h"
#include "examples/mnist/progress.h"
#include "nn/nn.h"
#include "optim/optim.h"

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

std::unique_ptr<mg::optim::Optimizer> make_optimizer(const Args& args,
                                                     const std::vector<mg::Tensor>& params) {
  using namespace mg::optim;
  if (args.optimizer == "sgd") {
    return std::make_unique<SGD>(params, SGDOptions{.lr = args.lr, .momentum = 0.9});
  }
  if (args.optimizer == "adam") return std::make_unique<Adam>(params, AdamOptions{.lr = args.lr});
  if (args.optimizer == "adamw") return std::make_unique<AdamW>(params, AdamWOptions{.lr = args.lr});
  return std::make_unique<Adagrad>(params, AdagradOptions{.lr = args.lr});
}

// The learning rate for step `step` of `total_steps`: constant, or a half cosine from the
// base rate down to 0 (annealing lets a few epochs settle into a better minimum).
double scheduled_lr(const Args& args, int64_t step, int64_t total_steps) {
  if (args.schedule == "constant") return args.lr;
  constexpr double kPi = 3.14159265358979323846;
  return 0.5 * args.lr * (1.0 + std::cos(kPi * static_cast<double>(step) / static_cast<double>(total_steps)));
}

// One pass over the training set; returns the mean loss per sample.
double train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer,
                   mg::data::DataLoader& loader, const Args& args, int64_t epoch) {
  model.train();
  mnist::Progress progress(epoch + 1, args.epochs, loader.num_batches());
  // NOTE: the loss over all samples so far is summed on the device and read only when a
  // line is printed, so a GPU step never waits for the host; float64 keeps every digit.
  mg::Tensor loss_sum = mg::zeros({}, {.dtype = mg::DType::Float64, .device = args.device});
  int64_t batches = 0, samples = 0;
  const int64_t total_steps = args.epochs * loader.num_batches();
  for (const mg::data::Batch& batch : loader) {
    optimizer.set_lr(scheduled_lr(args, epoch * loader.num_batches() + batches, total_steps));
    optimizer.zero_grad();
    mg::Tensor logits = model(batch.inputs);  // (B, classes)
    mg::Tensor loss = mg::cross_entropy(logits, batch.targets);
    loss.backward();
    optimizer.step();

    const int64_t batch_size = batch.targets.size(0);
    loss_sum = loss_sum + loss.detach() * static_cast<double>(batch_size);
    ++batches;
    samples += batch_size;
    if (progress.wants_update(batches)) {
      progress.update(batches, samples, loss_sum.item<double>() / samples);
    }
  }
  progress.finish();
  return loss_sum.item<double>() / samples;
}

// The fraction of `loader`'s samples whose most likely class is the target.
double evaluate(mg::nn::Module& model, mg::data::DataLoader& loader, const Args& args) {
  mg::NoGradGuard no_grad;
  model.eval();
  mg::Tensor correct = mg::zeros({}, {.dtype = mg::DType::Int64, .device = args.device});
  int64_t samples = 0;
  for (const mg::data::Batch& batch : loader) {
    mg::Tensor predictions = mg::argmax(model(batch.inputs), 1);  // (B)
    correct = correct + mg::sum(mg::eq(predictions, batch.targets));
    samples += batch.targets.size(0);
  }
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(samples);
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

// Creates and removes `path`'s temporary file, so that an unwritable summary path is
// reported before training rather than after it.
void check_writable(const std::string& path) {
  const std::string temporary = path + ".tmp";
  MG_CHECK(std::ofstream(temporary).good(), "cannot write the summary file: '", temporary,
           "' cannot be created. Hint: --summary-json needs a path in a writable folder.");
  std::filesystem::remove(temporary);
}

// Writes the summary to path.tmp, then renames it over `path`: a crash mid-write never
// leaves a half-written summary behind.
void write_summary(const std::string& path, const Args& args, const RunResult& result) {
  mg::JsonWriter json;
  json.begin_object()
      .key("model").value(args.model)
      .key("dataset").value(args.data_dir)
      .key("device").value(args.device.str())
      .key("optimizer").value(args.optimizer)
      .key("schedule").value(args.schedule)
      .key("epochs").value(args.epochs)
      .key("batch_size").value(args.batch_size)
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
  json.end_object();
  const std::string text = json.str();

  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary);
    file << text << '\n';
    MG_CHECK(file.good(), "cannot write the summary file '", temporary, "'.");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  MG_CHECK(!error, "cannot rename '", temporary, "' to '", path, "': ", error.message(), ".");
}

int run(const Args& args) {
  if (args.threads) {
    omp_set_num_threads(*args.threads);
    Eigen::setNbThreads(*args.threads);
  }
  if (!args.summary_json.empty()) check_writable(args.summary_json);
  mg::manual_seed(args.seed);

  // NOTE: the test split is normalised with the training split's pixel statistics: a
  // model in use sees inputs normalised the way it was trained.
  const mg::data::MnistDataset train_set(args.data_dir, mg::data::Split::Train);
  const mg::data::MnistDataset test_set(args.data_dir, mg::data::Split::Test,
                                        train_set.normalization());
  // On a GPU, batches are built in pinned memory two ahead by a background thread, so
  // the GPU need not wait for the host to gather and copy the next one.
  const bool on_gpu = args.device.is_cuda();
  mg::data::DataLoader train_loader(train_set, {.batch_size = args.batch_size,
                                                .shuffle = true,
                                                .seed = args.seed,
                                                .flatten = true,
                                                .device = args.device,
                                                .pin_memory = on_gpu,
                                                .prefetch = on_gpu ? 2 : 0});
  mg::data::DataLoader test_loader(test_set, {.batch_size = args.batch_size,
                                              .flatten = true,
                                              .device = args.device,
                                              .pin_memory = on_gpu,
                                              .prefetch = on_gpu ? 2 : 0});

  const mg::Shape image_shape = train_set.image_shape();
  const int64_t classes = std::max(train_set.num_classes(), test_set.num_classes());
  mg::Generator init_generator(args.seed);
  std::shared_ptr<mg::nn::Module> model = build_mlp(image_shape.numel(), classes, init_generator);
  model->to(args.device);
  std::unique_ptr<mg::optim::Optimizer> optimizer = make_optimizer(args, model->parameters());

  RunResult result;
  result.parameters = model->num_parameters();
  std::printf("%s on %s: %lld training and %lld test images of %lldx%lld, %lld classes\n",
              args.model.c_str(), args.data_dir.c_str(), static_cast<long long>(train_set.size()),
              static_cast<long long>(test_set.size()), static_cast<long long>(image_shape[0]),
              static_cast<long long>(image_shape[1]), static_cast<long long>(classes));
  std::printf("%lld parameters; %s, lr %g, batch %lld, %lld epochs, on %s\n",
              static_cast<long long>(result.parameters), args.optimizer.c_str(), args.lr,
              static_cast<long long>(args.batch_size), static_cast<long long>(args.epochs),
              args.device.str().c_str());
  std::fflush(stdout);

  for (int64_t epoch = 0; epoch < args.epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    result.final_train_loss = train_epoch(*model, *optimizer, train_loader, args, epoch);
    const double train_seconds = seconds_since(start);
    result.test_accuracy = evaluate(*model, test_loader, args);
    result.seconds_per_epoch.push_back(seconds_since(start));
    result.train_seconds += train_seconds;
    result.train_samples += train_set.size();
    std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.1f s (%.0f samples/s)\n",
                static_cast<long long>(epoch + 1), result.final_train_loss,
                100.0 * result.test_accuracy, result.seconds_per_epoch.back(),
                train_set.size() / train_seconds);
    std::fflush(stdout);
  }

  std::printf(
      "\nMemory on %s by category: PARAMETER = weights and biases, GRADIENT = their .grad, "
      "OPTIMIZER_STATE = %s's moments/counters, ACTIVATION = tensors saved for backward, "
      "INPUT = dataset and batches, TEMPORARY = intermediate results, WORKSPACE = library "
      "scratch space.\n%s\n",
      args.device.str().c_str(), args.optimizer.c_str(),
      mg::memory::report(args.device).c_str());
  std::printf("%s: %lld parameters, test accuracy %.2f%% after %lld epochs, %.1f s\n",
              args.model.c_str(), static_cast<long long>(result.parameters),
              100.0 * result.test_accuracy, static_cast<long long>(args.epochs),
              total(result.seconds_per_epoch));
  if (!args.summary_json.empty()) {
    write_summary(args.summary_json, args, result);
    std::printf("summary written to %s\n", args.summary_json.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "mnist";
  Args args;
  try {
    args = mnist::parse_args(argc, argv);
  } catch (const mnist::UsageError& error) {
    std::cerr << program << ": " << error.what() << "\n\n" << mnist::usage(program);
    return 2;
  }
  if (args.help) {
    std::cout << mnist::usage(program);
    return 0;
  }
  try {
    return run(args);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << '\n';
    return 1;
  }
}
