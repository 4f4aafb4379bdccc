// bench/train_step.cpp — times memgrad's full training step (zero_grad, forward, loss,
// backward, optimizer step) on a fixed synthetic batch, and measures the step's peak memory,
// for side-by-side comparison with bench/torch_reference.py (same model, same flags, same
// JSON line). `--host-overhead` instead times the host's cost of issuing one tiny op.
//
//   bench_train_step --model mlp --batch 128 --optim adam --device cuda --warmup 50 --steps 500
//   bench_train_step --model cnn --batch 128 --optim adam --device cpu --threads 2 --warmup 5 --steps 30
//   bench_train_step --host-overhead --device cuda
//
// How a step is timed: after --warmup untimed steps, every one of --steps steps is bracketed
// by marks on the device's timeline — CUDA events on the current stream (so the host never
// waits inside the loop and a step's time is what the GPU timeline shows, host gaps
// included), a steady clock on the CPU — and the median, p10 and p90 of those intervals are
// reported, together with the wall time of the whole timed loop divided by --steps
// (`mean_ms`). Peak memory is measured over one more step after the warm-up, from
// reset_peak_stats() to the end of that step.
//
// Models (--model): mlp, the 784-512-256-10 MLP of examples/mnist on (B, 784) inputs; cnn,
// nn::MnistCnn (PyTorch's MNIST example net) on (B, 1, 28, 28) images; 10 classes each.
//
// Output: one JSON line on stdout ("threads" in it when --threads is given). Exit codes: 0
// done, 1 an error while running, 2 a bad command line.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/autograd/conv.h>
#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/autograd/loss.h>
#include <memgrad/core/device.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/core/random.h>
#include <memgrad/cuda/captured_step.h>
#include "examples/common/cli.h"
#include "examples/common/step_benchmark.h"
#include "examples/common/timeline.h"
#include <memgrad/nn/nn.h>
#include <memgrad/optim/optim.h>

#ifdef MG_WITH_CUDA
#include <memgrad/cuda/runtime.h>
#endif

namespace {

using examples::quantile;
using examples::Timeline;
using Clock = std::chrono::steady_clock;

// ---- the models ----

constexpr int64_t kImageSize = 28;
constexpr int64_t kClasses = 10;

// (B, 784) -> 512 -> 256 -> (B, 10), as examples/mnist builds it.
std::shared_ptr<mg::nn::Module> build_mlp(mg::Generator& generator) {
  using namespace mg::nn;
  const int64_t pixels = kImageSize * kImageSize;
  return std::make_shared<Sequential>(
      std::make_shared<Linear>(pixels, 512, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(512, 256, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, kClasses, true, &generator));
}

std::shared_ptr<mg::nn::Module> build_cnn(mg::Generator& generator) {
  return std::make_shared<mg::nn::MnistCnn>(mg::Shape{kImageSize, kImageSize}, kClasses, &generator);
}

// What --model names: the builder and the shape of one input (without the batch).
struct BenchModel {
  std::string name;
  mg::Shape input_shape;
  std::function<std::shared_ptr<mg::nn::Module>(mg::Generator&)> build;
};

const std::vector<BenchModel>& bench_models() {
  static const std::vector<BenchModel> models = {
      {"mlp", {kImageSize * kImageSize}, build_mlp},
      {"cnn", {1, kImageSize, kImageSize}, build_cnn},
  };
  return models;
}

// The models' names, joined by `separator`.
std::string model_names(const std::string& separator) {
  std::string names;
  for (const BenchModel& model : bench_models()) names += (names.empty() ? "" : separator) + model.name;
  return names;
}

// The model named `name`, or nullptr.
const BenchModel* find_model(const std::string& name) {
  const std::vector<BenchModel>& models = bench_models();
  const auto found =
      std::find_if(models.begin(), models.end(), [&](const BenchModel& model) { return model.name == name; });
  return found == models.end() ? nullptr : &*found;
}

// ---- command line ----

using examples::UsageError;

struct Args {
  std::string model = "mlp";
  int64_t batch_size = 128;
  std::string optimizer = "adam";
  std::optional<double> lr;  // unset: the optimizer's default below
  std::string device_name = "cuda";
  mg::Device device = mg::Device::cuda();
  int64_t warmup = 50;
  int64_t steps = 500;
  uint64_t seed = 0;
  std::optional<int> threads;  // CPU only; unset: all cores
  bool host_overhead = false;
  bool cuda_graph = false;  // time replays of the step captured as a CUDA graph
  std::string tiny_op = "add";  // what the host-overhead chain is made of: add or conv
  int64_t ops = 1000;          // length of the host-overhead chain
  int64_t repeats = 20;        // chains timed for the host overhead (the median is reported)
  bool help = false;
};

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [--model " + model_names("|") + "] [--batch N] [--optim sgd|adam|adamw|adagrad] [--lr X]\n"
         "       [--device cpu|cuda] [--warmup N] [--steps N] [--seed N] [--threads N] [--cuda-graph]\n"
         "   or: " + program + " --host-overhead [--tiny-op add|conv] [--device cpu|cuda] [--ops N]\n"
         "                [--repeats N]\n"
         "\n"
         "Times the full training step (zero_grad, forward, cross-entropy, backward, step) of\n"
         "a model on a fixed random batch and prints one JSON line: median, p10 and p90 step\n"
         "time over --steps steps after --warmup steps, mean_ms (timed loop / steps),\n"
         "samples/s, and the peak allocated/reserved bytes of one step. --model mlp is the\n"
         "784-512-256-10 MLP on (B, 784) inputs; cnn is PyTorch's MNIST example net\n"
         "(nn::MnistCnn) on (B, 1, 28, 28) images. --cuda-graph (cuda only) captures the step\n"
         "once (mg::cuda::CapturedStep, three warm-up steps) and times its replays, adding\n"
         "graph_pool_bytes, what the graph's private memory pool holds.\n"
         "--host-overhead times a chain of --ops tiny ops and prints the host's microseconds\n"
         "per op: --tiny-op add (default) is y = y * 1.0001 + 0.5 on one element; conv is a\n"
         "3x3 convolution of a (1, 16, 8, 8) channels-last batch (float16 on cuda, float32 on\n"
         "cpu), which shows the cost of a call into the convolution library.\n"
         "Defaults: --model mlp --batch 128 --optim adam --device cuda --warmup 50 --steps 500\n"
         "--ops 1000 --repeats 20; --lr as torch.optim's defaults (sgd: 0.01, momentum 0.9).\n";
}

Args parse_args(int argc, char** argv) {
  Args args;
  const examples::FlagHandlers flags = {
      {"--model",
       [&](const std::string& value) {
         if (find_model(value) == nullptr) {
           throw UsageError("unknown model '" + value + "'; choose " + model_names(" or "));
         }
         args.model = value;
       }},
      {"--batch", [&](const std::string& value) { args.batch_size = examples::parse_count("--batch", value); }},
      {"--optim",
       [&](const std::string& value) {
         if (value != "sgd" && value != "adam" && value != "adamw" && value != "adagrad") {
           throw UsageError("--optim must be sgd, adam, adamw or adagrad, got '" + value + "'");
         }
         args.optimizer = value;
       }},
      {"--lr", [&](const std::string& value) { args.lr = examples::parse_positive_real("--lr", value); }},
      {"--device",
       [&](const std::string& value) {
         args.device = examples::parse_device(value);
         args.device_name = value;
       }},
      {"--warmup", [&](const std::string& value) { args.warmup = examples::parse_count("--warmup", value, 0); }},
      {"--steps", [&](const std::string& value) { args.steps = examples::parse_count("--steps", value); }},
      {"--seed", [&](const std::string& value) { args.seed = examples::parse_number<uint64_t>("--seed", value); }},
      {"--threads",
       [&](const std::string& value) { args.threads = static_cast<int>(examples::parse_count("--threads", value)); }},
      {"--tiny-op",
       [&](const std::string& value) {
         if (value != "add" && value != "conv") throw UsageError("--tiny-op must be add or conv, got '" + value + "'");
         args.tiny_op = value;
       }},
      {"--ops", [&](const std::string& value) { args.ops = examples::parse_count("--ops", value, 2); }},
      {"--repeats", [&](const std::string& value) { args.repeats = examples::parse_count("--repeats", value); }},
  };
  const examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
      {"--host-overhead", [&] { args.host_overhead = true; }},
      {"--cuda-graph", [&] { args.cuda_graph = true; }},
  };
  examples::parse_flags(argc, argv, flags, switches);
  if (args.cuda_graph && (!args.device.is_cuda() || args.host_overhead)) {
    throw UsageError("--cuda-graph captures a training step on a CUDA device: it needs --device cuda and "
                     "no --host-overhead");
  }
  return args;
}

// ---- one training step ----

// torch.optim's defaults, so that both frameworks run the same update; SGD adds momentum 0.9
// (as examples/mnist does) so that it keeps a state tensor per parameter.
std::unique_ptr<mg::optim::Optimizer> make_optimizer(const Args& args,
                                                     const std::vector<mg::Tensor>& params) {
  using namespace mg::optim;
  if (args.optimizer == "sgd") {
    return std::make_unique<SGD>(params, SGDOptions{.lr = args.lr.value_or(0.01), .momentum = 0.9});
  }
  if (args.optimizer == "adam") return std::make_unique<Adam>(params, AdamOptions{.lr = args.lr.value_or(1e-3)});
  if (args.optimizer == "adamw") {
    return std::make_unique<AdamW>(params, AdamWOptions{.lr = args.lr.value_or(1e-3)});
  }
  return std::make_unique<Adagrad>(params, AdagradOptions{.lr = args.lr.value_or(1e-2)});
}

struct Trainer {
  std::shared_ptr<mg::nn::Module> model;
  std::unique_ptr<mg::optim::Optimizer> optimizer;
  mg::Tensor inputs;   // (B, ...the model's input shape) float32, INPUT
  mg::Tensor targets;  // (B) int64, INPUT

  // One full step; issues work to the device and never waits for it.
  void step() {
    optimizer->zero_grad();
    mg::Tensor loss = mg::cross_entropy((*model)(inputs), targets);
    loss.backward();
    optimizer->step();
  }
};

Trainer make_trainer(const Args& args) {
  mg::manual_seed(args.seed);
  mg::Generator init_generator(args.seed);
  const BenchModel& model = *find_model(args.model);
  Trainer trainer;
  trainer.model = model.build(init_generator);
  trainer.model->to(args.device);
  trainer.optimizer = make_optimizer(args, trainer.model->parameters());
  // NOTE: made on the host and copied over, as a data loader's batch arrives; the one batch
  // is reused by every step so that the benchmark times the step, not the input pipeline.
  mg::Generator data_generator(args.seed + 1);
  mg::Shape input_shape = model.input_shape;
  input_shape.insert(0, args.batch_size);
  trainer.inputs = mg::randn(input_shape, {}, &data_generator).to(args.device);
  trainer.targets = mg::randint(0, kClasses, {args.batch_size}, {.dtype = mg::DType::Int64},
                                &data_generator)
                        .to(args.device);
  trainer.inputs.set_memory_category(mg::MemoryCategory::Input);
  trainer.targets.set_memory_category(mg::MemoryCategory::Input);
  return trainer;
}

// ---- the two benchmarks ----

int run_train_step(const Args& args) {
  Trainer trainer = make_trainer(args);
  std::optional<mg::cuda::CapturedStep> captured;
  if (args.cuda_graph) captured.emplace([&] { trainer.step(); }, mg::cuda::CaptureOptions{.device = args.device});
  const examples::StepMeasurement measurement = examples::measure_steps(
      args.device, args.warmup, args.steps, examples::replay_or(captured, [&] { trainer.step(); }));

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("cuda_graph").value(args.cuda_graph)
      .key("model").value(args.model)
      .key("batch").value(args.batch_size)
      .key("optim").value(args.optimizer)
      .key("device").value(args.device_name)
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps);
  if (args.threads) json.key("threads").value(*args.threads);
  examples::write_step_fields(json, measurement, args.batch_size);
  if (captured) json.key("graph_pool_bytes").value(static_cast<int64_t>(captured->pool_bytes()));
  json.end_object();
  std::cout << json.str() << std::endl;
  return 0;
}

// Host time to issue one tiny op: a chain of `ops` dependent ops on a one-element tensor,
// timed from the first issue to the last (the device runs behind and is not waited for),
// repeated and the median taken; `us_per_op_synced` includes waiting for the device.
int run_host_overhead(const Args& args) {
  mg::NoGradGuard no_grad;
  const bool conv = args.tiny_op == "conv";
  const mg::DType dtype = conv && args.device.is_cuda() ? mg::DType::Float16 : mg::DType::Float32;
  mg::Tensor y = conv ? mg::ones({1, 16, 8, 8}, {.dtype = dtype, .device = args.device})
                            .contiguous(mg::MemoryFormat::ChannelsLast)
                      : mg::ones({1}, {.device = args.device});
  // A 3x3 window that averages, so the chain's values stay near 1 in float16.
  const mg::Tensor weight = mg::full({16, 16, 3, 3}, 1.0 / 144, {.dtype = dtype, .device = args.device})
                                .contiguous(mg::MemoryFormat::ChannelsLast);
  auto chain = [&] {
    if (conv) {
      for (int64_t i = 0; i < args.ops / 2 * 2; ++i) y = mg::conv2d(y, weight, {}, {.padding = {1, 1}});
    } else {
      for (int64_t i = 0; i < args.ops / 2; ++i) y = y * 1.0001 + 0.5;  // two ops per turn
    }
  };
  chain();  // warm-up: the allocator's cache and the kernels' first launches
  Timeline::synchronize(args.device);

  const int64_t ops = args.ops / 2 * 2;
  std::vector<double> issue_us, synced_us;
  for (int64_t r = 0; r < args.repeats; ++r) {
    const Clock::time_point start = Clock::now();
    chain();
    const Clock::time_point issued = Clock::now();
    Timeline::synchronize(args.device);
    const Clock::time_point done = Clock::now();
    issue_us.push_back(std::chrono::duration<double, std::micro>(issued - start).count() / ops);
    synced_us.push_back(std::chrono::duration<double, std::micro>(done - start).count() / ops);
  }
  // Reads the result so that no step of the chain can be skipped.
  const double result = y.sum().item<double>();

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("benchmark").value("host_overhead")
      .key("tiny_op").value(args.tiny_op)
      .key("device").value(args.device_name)
      .key("ops").value(ops)
      .key("repeats").value(args.repeats)
      .key("us_per_op").value(quantile(issue_us, 0.5))
      .key("us_per_op_synced").value(quantile(synced_us, 0.5))
      .key("result").value(result)
      .end_object();
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "bench_train_step",
      [&](int count, char** values) {
        args = parse_args(count, values);
        return !args.help;
      },
      usage,
      [&] {
        if (args.threads) examples::set_cpu_threads(*args.threads);
#ifdef MG_WITH_CUDA
        mg::cuda::set_allow_tf32(false);  // full float32 matmuls, as torch_reference.py asks
#endif
        return args.host_overhead ? run_host_overhead(args) : run_train_step(args);
      });
}
