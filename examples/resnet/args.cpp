// examples/resnet/args.cpp — the resnet program's flags, their defaults and checks.
#include "examples/resnet/args.h"

#include "examples/common/auto_accumulation.h"
#include "examples/common/block_checkpoint_flag.h"
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

namespace resnet {

using examples::UsageError;

Args parse_args(int argc, char** argv) {
  Args args;
  bool model_given = false;
  examples::FlagHandlers flags = {
      {"--model",
       [&](const std::string& value) {
         if (value != "resnet18" && value != "resnet50") {
           throw UsageError("unknown model '" + value + "'; choose resnet18 or resnet50");
         }
         args.model = value;
         model_given = true;
       }},
      {"--data", [&](const std::string& value) { args.data_dir = value; }},
      {"--epochs", [&](const std::string& value) { args.epochs = examples::parse_count("--epochs", value); }},
      {"--batch", [&](const std::string& value) { args.batch_size = examples::parse_count("--batch", value); }},
      {"--accum", [&](const std::string& value) { args.accum = examples::parse_count("--accum", value); }},
      {"--lr", [&](const std::string& value) { args.lr = examples::parse_positive_real("--lr", value); }},
      {"--optimizer",
       [&](const std::string& value) {
         if (value != "sgd" && value != "adamw") throw UsageError("--optimizer must be sgd or adamw, got '" + value + "'");
         args.optimizer = value == "sgd" ? Optimizer::Sgd : Optimizer::AdamW;
       }},
      {"--optimizer-state",
       [&](const std::string& value) { args.optimizer_state = examples::parse_optimizer_state(value); }},
      {"--seed", [&](const std::string& value) { args.seed = examples::parse_number<uint64_t>("--seed", value); }},
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--threads",
       [&](const std::string& value) { args.threads = static_cast<int>(examples::parse_count("--threads", value)); }},
      {"--limit", [&](const std::string& value) { args.limit = examples::parse_count("--limit", value); }},
      {"--save", [&](const std::string& value) { args.save_path = examples::parse_file_name("--save", value); }},
      {"--resume", [&](const std::string& value) { args.resume_path = examples::parse_file_name("--resume", value); }},
      {"--init-from", [&](const std::string& value) { args.init_from = examples::parse_file_name("--init-from", value); }},
      {"--stop-after", [&](const std::string& value) { args.stop_after = examples::parse_count("--stop-after", value); }},
      {"--summary-json",
       [&](const std::string& value) { args.summary_json = examples::parse_file_name("--summary-json", value); }},
      {"--amp", [&](const std::string& value) { args.amp = examples::parse_amp(value); }},
      {"--steps", [&](const std::string& value) { args.steps = examples::parse_count("--steps", value); }},
      {"--warmup", [&](const std::string& value) { args.warmup = examples::parse_count("--warmup", value, 0); }},
      {"--fit-batch", [&](const std::string& value) { args.fit_batch = examples::parse_bytes("--fit-batch", value); }},
      {"--world-size", [&](const std::string& value) { args.world_size = examples::parse_world_size(value); }},
  };
  examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
      {"--bench", [&] { args.bench = true; }},
      {"--augment", [&] { args.augment = true; }},
      {"--channels-last", [&] { args.channels_last = true; }},
      {"--no-cudnn-fusion", [&] { args.cudnn_fusion = false; }},
      {"--no-cudnn-backward-fusion", [&] { args.cudnn_backward_fusion = false; }},
      {"--cudnn-benchmark", [&] { args.cudnn_benchmark = true; }},
      {"--dependent-launch", [&] { args.dependent_launch = true; }},
      {"--wgrad-stream", [&] { args.wgrad_stream = true; }},
      {"--cuda-graph", [&] { args.cuda_graph = true; }},
      {"--predict-memory", [&] { args.predict_memory = true; }},
      {"--detect-anomaly", [&] { args.detect_anomaly = true; }},
      {"--deterministic", [&] { args.deterministic = true; }},
      {"--distributed", [&] { args.distributed = true; }},
      {"--zero", [&] { args.zero = true; }},
  };
  args.memory_recording.add_to(flags);
  examples::add_out_of_memory_flags(flags, switches, args.out_of_memory);
  examples::add_block_checkpoint_flag(flags, switches, args.checkpoint);
  args.budget.add_to(flags, switches);
  const examples::GivenFlags given = examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;  // the checks below are for a run
  if (!args.threads) args.threads = examples::default_cpu_threads();
  args.distributed = examples::wants_distributed(args.distributed);
  examples::check_amp_device(args.amp, args.device);
  if (args.optimizer == Optimizer::Sgd && given.has("--optimizer-state")) {
    throw UsageError("--optimizer-state places AdamW's moments: it needs --optimizer adamw");
  }
  examples::check_optimizer_state_flags(args.optimizer_state, args.zero, args.cuda_graph);
  examples::check_block_checkpoint(args.checkpoint, args.device);
  std::vector<std::string> levers_given;
  for (const char* lever : {"--checkpoint", "--optimizer-state", "--accum"}) {
    if (given.has(lever)) levers_given.push_back(lever);
  }
  examples::check_budget_flags(args.budget, levers_given, args.distributed, args.fit_batch.has_value(), args.cuda_graph,
                               args.out_of_memory.auto_accum);
  if (args.optimizer == Optimizer::AdamW && !given.has("--lr")) args.lr = 1e-3;
  if (args.wgrad_stream && !args.device.is_cuda()) {
    throw UsageError("--wgrad-stream orders CUDA streams: it needs --device cuda");
  }
  if (args.detect_anomaly) examples::check_detect_anomaly(args.amp, args.predict_memory || args.fit_batch.has_value());
  if (!args.bench && model_given && args.model != "resnet18") {
    throw UsageError("training uses resnet18; --model " + args.model + " is for --bench");
  }
  examples::check_cuda_graph(args.cuda_graph, args.device, args.accum,
                             args.memory_recording.any() || args.predict_memory || args.fit_batch ||
                                 args.detect_anomaly);
  const bool predicting = args.predict_memory || args.fit_batch.has_value();
  // The flags a mode leaves out (main.cpp: run_training, predict_training_memory; bench.cpp:
  // run_bench, predict_bench_memory); the run's settings stay welcome with
  // --predict-memory, which predicts the run they describe.
  examples::refuse_ignored_flags(
      given, {{args.bench,
               examples::with_out_of_memory_flags(
                   {"--data", "--epochs", "--limit", "--lr", "--augment", "--save", "--resume", "--stop-after"}),
               "with --bench: it times steps on one batch of random images, without a dataset, a schedule or "
               "checkpoints"},
              {!args.bench, {"--steps", "--warmup"},
               "without --bench: they count --bench's timed and untimed steps; training runs --epochs"},
              {predicting,
               examples::with_out_of_memory_flags(examples::with_memory_recording_flags({"--save", "--resume"})),
               "with --predict-memory or --fit-batch: they train nothing (no checkpoint to write or continue, "
               "and the simulated device's steps are not recorded)"},
              {args.fit_batch.has_value(), {"--predict-memory", "--batch"},
               "with --fit-batch: it searches the batch itself and predicts its peak"},
              {args.device.is_cpu(), {"--no-cudnn-fusion", "--no-cudnn-backward-fusion", "--cudnn-benchmark",
                                      "--dependent-launch"},
               "with --device cpu: they choose how CUDA kernels run"}});
  if (!args.bench && args.stop_after > args.epochs) {
    throw UsageError("--stop-after " + std::to_string(args.stop_after) + " is past the run's end (--epochs " +
                     std::to_string(args.epochs) + ")");
  }
  examples::check_init_from_flags(args.init_from, args.resume_path,
                                  args.bench ? "--bench" : predicting ? "--predict-memory (or --fit-batch)" : "");
  examples::check_distributed_flags({.distributed = args.distributed, .zero = args.zero, .cuda_graph = args.cuda_graph,
                                     .predicting = predicting, .world_size = args.world_size});
  examples::check_out_of_memory_flags(args.out_of_memory, args.distributed, args.cuda_graph);
  std::vector<std::pair<std::string, std::string>> outputs = {{"--save", args.save_path},
                                                              {"--summary-json", args.summary_json}};
  for (const auto& output : args.memory_recording.outputs()) outputs.push_back(output);
  examples::check_output_paths(outputs);
  return args;
}

std::string usage(const std::string& program) {
  return "usage: " + program + R"( [options]
   or: )" + program + R"( --bench [--model resnet18|resnet50] [--batch N] [--steps N] [--warmup N]
                [--accum N] [--checkpoint [selective|whole|offload]] [--amp fp16|bf16] [--device cpu|cuda]
                [--optimizer sgd|adamw [--optimizer-state device|8bit|offload|offload-delayed]]
                [--channels-last] [--no-cudnn-fusion] [--no-cudnn-backward-fusion] [--cudnn-benchmark]
                [--dependent-launch] [--wgrad-stream]
                [--memory-timeline FILE.html | --cuda-graph]
                [--detect-anomaly | --predict-memory | --fit-batch BYTES]
                [--distributed [--zero]]  (under mpirun: every rank times its step;
                                           predicting: --world-size N, per rank)

Trains ResNet-18 (small-image stem: 3x3 first convolution, no max pool; one input
channel) on Fashion-MNIST padded to 32x32, with SGD (momentum 0.9, Nesterov, weight decay
5e-4) and a one-cycle learning-rate schedule, and reports accuracy, time and memory.

  --data DIR               MNIST-format folder (default /usr/share/datasets/fashion-mnist)
  --epochs N               passes over the training set (default 15)
  --batch N                samples per batch, per rank when distributed (default 256)
  --accum N                accumulate the gradients of N batches of --batch samples
                           before each optimizer step (the loss of each scaled by 1/N):
                           steps of N x --batch samples at the activation memory of one
                           batch (default 1; batch norm still normalises each batch of
                           --batch on its own); the schedule counts optimizer steps
  --checkpoint [selective|whole|offload]
                           gradient checkpointing of the stem and each block of
                           layer1..layer4: whole (the flag alone) keeps only their inputs
                           through the forward and recomputes each block when backward
                           reaches it (one more forward of the trunk per step, for a lower
                           activation peak); selective also keeps the convolutions'
                           outputs and recomputes only batch norm, ReLU and the adds
                           (less compute, more memory); offload keeps what none keeps, in
                           host memory, copied back in backward (--device cuda: two
                           transfers of each saved byte for a GPU's activation memory);
                           none: off (default)
  --amp fp16|bf16|fp32     mixed precision: forward under autocast (convolutions and
                           linear layers in float16/bfloat16, losses and reductions in
                           float32, float32 master weights); fp16 scales the loss with a
                           GradScaler and needs --device cuda (default fp32: none)
  --lr X                   the one-cycle schedule's peak learning rate (default 0.1;
                           1e-3 with --optimizer adamw)
  --optimizer sgd|adamw    SGD as above (the default), or AdamW (weight decay 0.05 on
                           the convolution and linear weights, none on biases and norms)
)" + examples::optimizer_state_usage() + R"(  --augment                random crops (pad 4, crop 32) and horizontal flips
  --channels-last          keep the model's weights and the batches in channels-last
                           (NHWC) memory format, which convolution kernels prefer on GPUs
  --no-cudnn-fusion        run apart what is fused by default on CUDA, training in
                           fp16/bf16 channels-last: batch norm's statistics generated in
                           the epilogue of the convolution before it
                           (mg::cuda::set_cudnn_fusion)
  --no-cudnn-backward-fusion
                           run apart what is fused by default on CUDA, training in fp16
                           channels-last: the backward data of a convolution after batch
                           norm + ReLU also applying the ReLU's backward and forming batch
                           norm's backward sums (mg::cuda::set_cudnn_backward_fusion)
  --cudnn-benchmark        on CUDA, time every engine cuDNN offers for each new
                           convolution shape and keep the fastest, as PyTorch's
                           torch.backends.cudnn.benchmark (mg::cuda::set_cudnn_benchmark;
                           the first step of each shape is slower; default: cuDNN's
                           heuristic's first engine)
  --dependent-launch       on CUDA GPUs of compute capability 9.0 and up, launch batch
                           norm's passes and reductions and pooling before the kernel
                           ahead has finished, to wait for it on the device
                           (mg::cuda::set_dependent_launch; faster for ResNet-18, not for
                           ResNet-50)
  --wgrad-stream           on CUDA, run the convolutions' weight gradients in backward on a
                           side stream, and everything else on a new stream at the device's
                           highest priority, so that the device places the kernels the step
                           waits for first (mg::autograd::set_weight_gradients_on_side_stream,
                           mg::cuda::StreamPriority::High; same results, ResNet-18's eager
                           step 9% faster, some more memory reserved)
  --seed N                 seeds initialisation, shuffling and augmentation (default 0)
  --device cpu|cuda        where to run (default cpu)
)" + examples::threads_usage() + R"(  --limit N                only about N training and N test samples per epoch (whole
                           batches), for quick trials
  --save FILE              after every epoch, write the model, the optimizer and the run's
                           progress to FILE (one safetensors file, written atomically)
  --resume FILE            continue the run saved in FILE exactly where it stopped (give
                           the same --epochs, --batch, --accum, --lr, --limit and
                           --augment; on another number of ranks, the same global batch:
                           ranks x --batch)
)" + examples::init_from_usage() + examples::kOutOfMemoryUsage + R"(  --stop-after N           end after epoch N of the --epochs the schedule is laid out for
                           (with --save, a later --resume continues the same run)
  --summary-json FILE      write a summary (accuracy, time to the best accuracy, memory by
                           category) as JSON
)" + examples::memory_recording_usage("the first 3 optimizer\n                           steps (with --bench: of every step run)") + R"(  --bench                  time training steps on random data instead: --model resnet18
                           (3x32x32 inputs, 10 classes) or resnet50 (3x224x224, 1000
                           classes), --batch (default 256), --steps timed steps (default
                           20) after --warmup steps (default 5), a step being --accum
                           micro-batches and one optimizer step; prints the median step
                           time, samples/s and the peak memory of one step, and one JSON
                           line on stdout with bench_train_step's fields
  --cuda-graph             with --bench: capture the step once as a CUDA graph
                           (mg::cuda::CapturedStep, 3 warm-up steps) and time its replays;
                           training: as below
)" + examples::cuda_graph_usage() + examples::budget_usage() + examples::detect_anomaly_usage() +
       examples::deterministic_usage() +
         examples::distributed_usage(/*with_zero=*/true) + R"(  --help                   show this text

Predicting memory (with or without --bench; --device names the target, no GPU needed):
)" + examples::prediction_usage() + examples::world_size_usage();
}

}  // namespace resnet
