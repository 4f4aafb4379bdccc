// examples/mnist/args.cpp — the mnist program's flags and their defaults.
#include "examples/mnist/args.h"

#include <map>

#include "examples/common/auto_accumulation.h"
#include "examples/common/cli.h"
#include "examples/common/cpu_cores.h"
#include "examples/common/detect_anomaly.h"
#include "examples/common/deterministic.h"
#include "examples/common/distributed_run.h"
#include "examples/common/graphed_step.h"
#include "examples/common/init_from.h"
#include "examples/common/memory_prediction.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/output_path.h"

namespace mnist {
namespace {

using examples::UsageError;

// Learning rates that train both models well in a few epochs (SGD with momentum 0.9).
double default_learning_rate(const std::string& optimizer) {
  static const std::map<std::string, double> rates = {
      {"sgd", 0.05}, {"adam", 1e-3}, {"adamw", 1e-3}, {"adagrad", 1e-2}};
  return rates.at(optimizer);
}

// The MLP's accuracy levels off after 3 epochs; the CNN needs about 5 to pass 91.5% on
// Fashion-MNIST.
int64_t default_epochs(const std::string& model) { return model == "cnn" ? 5 : 3; }

// The flags that cannot go with a data-parallel run, and --zero without one.
void check_distributed(const Args& args) {
  const bool predicting = args.predict_memory || args.fit_batch.has_value();
  examples::check_distributed_flags({.distributed = args.distributed, .zero = args.zero, .cuda_graph = args.cuda_graph,
                                     .predicting = predicting, .world_size = args.world_size});
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args args;
  bool lr_given = false;
  examples::FlagHandlers flags = {
      {"--model",
       [&](const std::string& value) {
         if (value != "mlp" && value != "cnn") throw UsageError("unknown model '" + value + "'; choose mlp or cnn");
         args.model = value;
       }},
      {"--data", [&](const std::string& value) { args.data_dir = value; }},
      {"--epochs", [&](const std::string& value) { args.epochs = examples::parse_count("--epochs", value); }},
      {"--batch", [&](const std::string& value) { args.batch_size = examples::parse_count("--batch", value); }},
      {"--accum", [&](const std::string& value) { args.accum = examples::parse_count("--accum", value); }},
      {"--limit", [&](const std::string& value) { args.limit = examples::parse_count("--limit", value); }},
      {"--lr",
       [&](const std::string& value) {
         args.lr = examples::parse_positive_real("--lr", value);
         lr_given = true;
       }},
      {"--optim",
       [&](const std::string& value) {
         if (value != "sgd" && value != "adam" && value != "adamw" && value != "adagrad") {
           throw UsageError("--optim must be sgd, adam, adamw or adagrad, got '" + value + "'");
         }
         args.optimizer = value;
       }},
      {"--schedule",
       [&](const std::string& value) {
         if (value != "cosine" && value != "constant") {
           throw UsageError("--schedule must be cosine or constant, got '" + value + "'");
         }
         args.schedule = value;
       }},
      {"--amp", [&](const std::string& value) { args.amp = examples::parse_amp(value); }},
      {"--seed", [&](const std::string& value) { args.seed = examples::parse_number<uint64_t>("--seed", value); }},
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--threads",
       [&](const std::string& value) {
         args.threads = static_cast<int>(examples::parse_count("--threads", value));
       }},
      {"--summary-json",
       [&](const std::string& value) { args.summary_json = examples::parse_file_name("--summary-json", value); }},
      {"--fit-batch", [&](const std::string& value) { args.fit_batch = examples::parse_bytes("--fit-batch", value); }},
      {"--save", [&](const std::string& value) { args.save_path = examples::parse_file_name("--save", value); }},
      {"--init-from", [&](const std::string& value) { args.init_from = examples::parse_file_name("--init-from", value); }},
      {"--world-size", [&](const std::string& value) { args.world_size = examples::parse_world_size(value); }},
  };
  examples::SwitchHandlers switches = {{"--help", [&] { args.help = true; }},
                                             {"-h", [&] { args.help = true; }},
                                             {"--checkpoint", [&] { args.checkpoint = true; }},
                                             {"--cuda-graph", [&] { args.cuda_graph = true; }},
                                             {"--predict-memory", [&] { args.predict_memory = true; }},
                                             {"--detect-anomaly", [&] { args.detect_anomaly = true; }},
                                             {"--deterministic", [&] { args.deterministic = true; }},
                                             {"--distributed", [&] { args.distributed = true; }},
                                             {"--zero", [&] { args.zero = true; }}};
  args.memory_recording.add_to(flags);
  examples::add_out_of_memory_flags(flags, switches, args.out_of_memory);
  const examples::GivenFlags given = examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;  // the checks below are for a run
  if (!args.threads) args.threads = examples::default_cpu_threads();
  args.distributed = examples::wants_distributed(args.distributed);
  examples::check_amp_device(args.amp, args.device);
  if (args.detect_anomaly) examples::check_detect_anomaly(args.amp, args.predict_memory || args.fit_batch.has_value());
  // NOTE: the MLP saves two ReLU outputs (768 floats per image) for backward; a checkpoint
  // would keep its input instead, the 784-pixel image, and save nothing.
  if (args.checkpoint && args.model != "cnn") {
    throw UsageError("--checkpoint is for --model cnn: the MLP's activations are smaller than the input a "
                     "checkpoint would keep");
  }
  examples::check_cuda_graph(args.cuda_graph, args.device, args.accum,
                             args.memory_recording.any() || args.predict_memory || args.fit_batch ||
                                 args.detect_anomaly);
  const bool predicting = args.predict_memory || args.fit_batch.has_value();
  // The flags a mode leaves out (main.cpp: run() trains, predict() runs the first steps on
  // the simulated device); the run's settings (--epochs, --lr, --limit, ...) stay
  // welcome with --predict-memory: it predicts the run they describe.
  examples::refuse_ignored_flags(
      given, {{predicting, examples::with_out_of_memory_flags(examples::with_memory_recording_flags({"--save"})),
               "with --predict-memory or --fit-batch: they train nothing (no checkpoint to write or continue, "
               "and the simulated device's steps are not recorded)"},
              {args.fit_batch.has_value(), {"--predict-memory", "--batch"},
               "with --fit-batch: it searches the batch itself and predicts its peak"}});
  examples::check_init_from_flags(args.init_from, /*resume=*/"", predicting ? "--predict-memory (or --fit-batch)" : "");
  check_distributed(args);
  examples::check_out_of_memory_flags(args.out_of_memory, args.distributed, args.cuda_graph);
  if (!lr_given) args.lr = default_learning_rate(args.optimizer);
  if (args.epochs == 0) args.epochs = default_epochs(args.model);
  std::vector<std::pair<std::string, std::string>> outputs = {{"--save", args.save_path},
                                                              {"--summary-json", args.summary_json}};
  for (const auto& output : args.memory_recording.outputs()) outputs.push_back(output);
  examples::check_output_paths(outputs);
  return args;
}

std::string usage(const std::string& program) {
  return "usage: " + program + R"( [options]
Trains a model on an MNIST-format dataset and reports accuracy, speed and memory.

  --model NAME             mlp: 784-512-256-10 with ReLU (the default), or cnn: PyTorch's
                           MNIST example net (two 3x3 convolutions, max-pool, dropout,
                           9216-128-10)
  --data DIR               folder with train-images-idx3-ubyte[.gz] and its three
                           companions (default /usr/share/datasets/fashion-mnist)
  --epochs N               passes over the training set (default: mlp 3, cnn 5)
  --batch N                samples per batch, per rank when distributed (default 128)
  --accum N                accumulate the gradients of N batches of --batch samples
                           before each optimizer step (the loss of each scaled by 1/N):
                           steps of N x --batch samples at the activation memory of one
                           batch (default 1); --schedule counts optimizer steps
  --checkpoint             cnn only: gradient checkpointing of the convolution block
                           (conv1, conv2 and the pool run again in backward instead of
                           keeping their outputs): the ACTIVATION peak falls (16% at
                           batch 128), the total peak does not, as this net's peak is in
                           the convolutions' own backward (see docs/memory.md); refused
                           for the MLP, whose saved activations are smaller than the
                           input a checkpoint keeps
)" + examples::cuda_graph_usage() + R"(  --amp fp16|bf16|fp32     mixed precision: forward under autocast (linear layers and
                           convolutions in float16/bfloat16, the loss in float32, float32
                           master weights); fp16 scales the loss with a GradScaler and
                           needs --device cuda (default fp32: none)
  --limit N                only about N training and N test samples per epoch (whole
                           batches), for quick trials
  --optim NAME             sgd (momentum 0.9), adam, adamw or adagrad (default adam)
  --lr X                   learning rate (default: sgd 0.05, adam/adamw 1e-3, adagrad 1e-2)
  --schedule NAME          cosine (the learning rate falls from --lr to 0 along a half
                           cosine over all steps) or constant (default cosine)
  --seed N                 seeds initialisation, dropout and shuffling (default 0)
  --device cpu|cuda        where to train (default cpu)
)" + examples::threads_usage() + R"(  --summary-json FILE      write a summary of the run (accuracy, time, memory) as JSON
)" + examples::memory_recording_usage("the first 3 optimizer\n                           steps") + R"(  --save FILE              after every epoch, write the model, the optimizer, the
                           schedule and the step (one safetensors file, written
                           atomically, that PyTorch's safetensors.torch.load_file reads)
)" + examples::init_from_usage() + examples::kOutOfMemoryUsage + examples::detect_anomaly_usage() + examples::deterministic_usage() +
         examples::distributed_usage(/*with_zero=*/true) +
         R"(  --help                   show this text

Predicting memory (--device names the target, no GPU needed):
)" + examples::prediction_usage() + examples::world_size_usage();
}

}  // namespace mnist
