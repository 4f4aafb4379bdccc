// bench/train_step.cpp — times memgrad's full training step (zero_grad, forward, loss,
// backward, optimizer step) on a fixed synthetic batch, and measures the step's peak memory,
// for side-by-side comparison with bench/torch_reference.py (same model, same flags, same
// JSON line). `--host-overhead` instead times the host's cost of issuing one tiny op.
//
//   bench_train_step --model mlp --batch 128 --optim adam --device cuda --warmup 50 --steps 500
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
// Output: one JSON line on stdout. Exit codes: 0 done, 1 an error while running, 2 a bad
// command line.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include <Eigen/Core>

#include "autograd/elementwise.h"
#include "bench/timeline.h"
#include "autograd/grad_mode.h"
#include "autograd/loss.h"
#include "core/device.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/memory.h"
#include "core/memory_category.h"
#include "core/random.h"
#include "nn/nn.h"
#include "optim/optim.h"

#ifdef MG_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace {

using bench::quantile;
using bench::Timeline;
using Clock = std::chrono::steady_clock;

// ---- command line ----

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
  int64_t ops = 1000;          // length of the host-overhead chain
  int64_t repeats = 20;        // chains timed for the host overhead (the median is reported)
  bool help = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [--model mlp] [--batch N] [--optim sgd|adam|adamw|adagrad] [--lr X]\n"
         "       [--device cpu|cuda] [--warmup N] [--steps N] [--seed N] [--threads N]\n"
         "   or: " + program + " --host-overhead [--device cpu|cuda] [--ops N] [--repeats N]\n"
         "\n"
         "Times the full training step (zero_grad, forward, cross-entropy, backward, step) of\n"
         "the 784-512-256-10 MLP on a fixed random batch and prints one JSON line: median,\n"
         "p10 and p90 step time over --steps steps after --warmup steps, mean_ms (timed loop\n"
         "/ steps), samples/s, and the peak allocated/reserved bytes of one step.\n"
         "--host-overhead times a chain of --ops tiny ops (y = y * 1.0001 + 0.5 on one\n"
         "element) and prints the host's microseconds per op.\n"
         "Defaults: --model mlp --batch 128 --optim adam --device cuda --warmup 50 --steps 500\n"
         "--ops 1000 --repeats 20; --lr as torch.optim's defaults (sgd: 0.01, momentum 0.9).\n";
}

template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw UsageError(flag + " expects a number, got '" + text + "'");
  }
  return value;
}

int64_t parse_count(const std::string& flag, const std::string& text, int64_t minimum) {
  const auto value = parse_number<int64_t>(flag, text);
  if (value < minimum) {
    throw UsageError(flag + " must be at least " + std::to_string(minimum) + ", got " + text);
  }
  return value;
}

Args parse_args(int argc, char** argv) {
  Args args;
  const std::map<std::string, std::function<void(const std::string&)>> flags = {
      {"--model",
       [&](const std::string& value) {
         if (value != "mlp") throw UsageError("unknown model '" + value + "'; choose mlp");
         args.model = value;
       }},
      {"--batch", [&](const std::string& value) { args.batch_size = parse_count("--batch", value, 1); }},
      {"--optim",
       [&](const std::string& value) {
         if (value != "sgd" && value != "adam" && value != "adamw" && value != "adagrad") {
           throw UsageError("--optim must be sgd, adam, adamw or adagrad, got '" + value + "'");
         }
         args.optimizer = value;
       }},
      {"--lr",
       [&](const std::string& value) {
         args.lr = parse_number<double>("--lr", value);
         if (!(*args.lr > 0) || !std::isfinite(*args.lr)) {
           throw UsageError("--lr must be a positive number, got " + value);
         }
       }},
      {"--device",
       [&](const std::string& value) {
         if (value == "cpu") args.device = mg::Device::cpu();
         else if (value == "cuda") args.device = mg::Device::cuda();
         else throw UsageError("--device must be cpu or cuda, got '" + value + "'");
         args.device_name = value;
       }},
      {"--warmup", [&](const std::string& value) { args.warmup = parse_count("--warmup", value, 0); }},
      {"--steps", [&](const std::string& value) { args.steps = parse_count("--steps", value, 1); }},
      {"--seed", [&](const std::string& value) { args.seed = parse_number<uint64_t>("--seed", value); }},
      {"--threads",
       [&](const std::string& value) {
         args.threads = static_cast<int>(parse_count("--threads", value, 1));
       }},
      {"--ops", [&](const std::string& value) { args.ops = parse_count("--ops", value, 2); }},
      {"--repeats", [&](const std::string& value) { args.repeats = parse_count("--repeats", value, 1); }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      args.help = true;
      continue;
    }
    if (flag == "--host-overhead") {
      args.host_overhead = true;
      continue;
    }
    std::optional<std::string> value;
    if (const size_t equals = flag.find('='); equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    }
    const auto found = flags.find(flag);
    if (found == flags.end()) throw UsageError("unknown flag '" + flag + "'");
    if (!value) {
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    found->second(*value);
  }
  return args;
}

// ---- the model and one training step ----

// (B, 784) -> 512 -> 256 -> (B, 10), as examples/mnist builds it.
std::shared_ptr<mg::nn::Module> build_mlp(int64_t pixels, int64_t classes, mg::Generator& generator) {
  using namespace mg::nn;
  return std::make_shared<Sequential>(
      std::make_shared<Linear>(pixels, 512, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(512, 256, true, &generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, classes, true, &generator));
}

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
  mg::Tensor inputs;   // (B, 784) float32, INPUT
  mg::Tensor targets;  // (B) int64, INPUT

  // One full step; issues work to the device and never waits for it.
  void step() {
    optimizer->zero_grad();
    mg::Tensor loss = mg::cross_entropy((*model)(inputs), targets);
    loss.backward();
    optimizer->step();
  }
};

constexpr int64_t kPixels = 28 * 28;
constexpr int64_t kClasses = 10;

Trainer make_trainer(const Args& args) {
  mg::manual_seed(args.seed);
  mg::Generator init_generator(args.seed);
  Trainer trainer;
  trainer.model = build_mlp(kPixels, kClasses, init_generator);
  trainer.model->to(args.device);
  trainer.optimizer = make_optimizer(args, trainer.model->parameters());
  // NOTE: made on the host and copied over, as a data loader's batch arrives; the one batch
  // is reused by every step so that the benchmark times the step, not the input pipeline.
  mg::Generator data_generator(args.seed + 1);
  trainer.inputs = mg::randn({args.batch_size, kPixels}, {}, &data_generator).to(args.device);
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
  for (int64_t i = 0; i < args.warmup; ++i) trainer.step();

  // Peak memory of one step, from the state a step starts in (parameters, optimizer state,
  // the batch; gradients freed by zero_grad inside the step).
  Timeline::synchronize(args.device);
  mg::memory::reset_peak_stats(args.device);
  trainer.step();
  Timeline::synchronize(args.device);
  const mg::memory::Snapshot memory = mg::memory::snapshot(args.device);

  Timeline timeline(args.device, args.steps + 1);
  const Clock::time_point loop_start = Clock::now();
  timeline.mark();
  for (int64_t i = 0; i < args.steps; ++i) {
    trainer.step();
    timeline.mark();
  }
  Timeline::synchronize(args.device);
  const double loop_ms = std::chrono::duration<double, std::milli>(Clock::now() - loop_start).count();
  const std::vector<double> step_ms = timeline.intervals_ms();
  const double mean_ms = loop_ms / static_cast<double>(args.steps);

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("model").value(args.model)
      .key("batch").value(args.batch_size)
      .key("optim").value(args.optimizer)
      .key("device").value(args.device_name)
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps)
      .key("step_ms_median").value(quantile(step_ms, 0.5))
      .key("step_ms_p10").value(quantile(step_ms, 0.1))
      .key("step_ms_p90").value(quantile(step_ms, 0.9))
      .key("mean_ms").value(mean_ms)
      .key("samples_per_s").value(static_cast<double>(args.batch_size) / (mean_ms / 1000.0))
      .key("peak_allocated_bytes").value(memory.peak_allocated_bytes)
      .key("peak_reserved_bytes").value(memory.peak_reserved_bytes)
      .key("peak_bytes_by_category").begin_object();
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    json.key(mg::category_name(static_cast<mg::MemoryCategory>(c))).value(memory.by_category[c].peak);
  }
  json.end_object().end_object();
  std::cout << json.str() << std::endl;
  return 0;
}

// Host time to issue one tiny op: a chain of `ops` dependent ops on a one-element tensor,
// timed from the first issue to the last (the device runs behind and is not waited for),
// repeated and the median taken; `us_per_op_synced` includes waiting for the device.
int run_host_overhead(const Args& args) {
  mg::NoGradGuard no_grad;
  mg::Tensor y = mg::ones({1}, {.device = args.device});
  auto chain = [&] {
    for (int64_t i = 0; i < args.ops / 2; ++i) y = y * 1.0001 + 0.5;  // two ops per turn
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
  const double result = y.item<double>();

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("benchmark").value("host_overhead")
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
  const std::string program = "bench_train_step";
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const UsageError& error) {
    std::cerr << program << ": " << error.what() << "\n\n" << usage(program);
    return 2;
  }
  if (args.help) {
    std::cout << usage(program);
    return 0;
  }
  try {
    if (args.threads) {
      omp_set_num_threads(*args.threads);
      Eigen::setNbThreads(*args.threads);
    }
#ifdef MG_WITH_CUDA
    mg::cuda::set_allow_tf32(false);  // full float32 matmuls, as torch_reference.py asks
#endif
    return args.host_overhead ? run_host_overhead(args) : run_train_step(args);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << '\n';
    return 1;
  }
}
