// examples/gpt/args.cpp — the gpt program's flags, their defaults and checks, and the
// model presets.
#include "examples/gpt/args.h"

#include <memgrad/core/error.h>

#include <algorithm>
#include <cmath>

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

namespace gpt {
namespace {

using examples::UsageError;

// Byte-level: one token per byte value.
constexpr int64_t kVocabulary = 256;

// The preset's sizes, before the single flags apply.
mg::nn::GPTOptions preset_options(const std::string& preset) {
  if (preset == "tiny") {  // seconds on a CPU
    return {.n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = 64, .dropout = 0.0};
  }
  if (preset == "small") {  // nanoGPT's character-level Shakespeare model: 10.7M parameters
    return {.n_layer = 6, .n_head = 6, .n_embd = 384, .block_size = 256, .dropout = 0.2};
  }
  // GPT-2's sizes (block 1024) with the byte vocabulary; no dropout, as GPT-2 is trained.
  mg::nn::GPTOptions options = preset == "gpt2"         ? mg::nn::GPTOptions::gpt2()
                               : preset == "gpt2-medium" ? mg::nn::GPTOptions::gpt2_medium()
                               : preset == "gpt2-large"  ? mg::nn::GPTOptions::gpt2_large()
                                                         : mg::nn::GPTOptions::gpt2_xl();
  options.dropout = 0.0;
  return options;
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args args;
  examples::FlagHandlers flags = {
      {"--data", [&](const std::string& value) { args.data = examples::parse_file_name("--data", value); }},
      {"--preset",
       [&](const std::string& value) {
         if (value != "tiny" && value != "small" && value != "gpt2" && value != "gpt2-medium" &&
             value != "gpt2-large" && value != "gpt2-xl") {
           throw UsageError("--preset must be tiny, small, gpt2, gpt2-medium, gpt2-large or gpt2-xl, got '" + value +
                            "'");
         }
         args.preset = value;
       }},
      {"--dropout",
       [&](const std::string& value) {
         const auto dropout = examples::parse_number<double>("--dropout", value);
         if (!(dropout >= 0 && dropout < 1)) throw UsageError("--dropout must be in [0, 1), got " + value);
         args.dropout = dropout;
       }},
      {"--steps", [&](const std::string& value) { args.steps = examples::parse_count("--steps", value); }},
      {"--batch", [&](const std::string& value) { args.batch_size = examples::parse_count("--batch", value); }},
      {"--accum", [&](const std::string& value) { args.accum = examples::parse_count("--accum", value); }},
      {"--lr", [&](const std::string& value) { args.lr = examples::parse_positive_real("--lr", value); }},
      {"--warmup", [&](const std::string& value) { args.warmup = examples::parse_count("--warmup", value, 0); }},
      {"--amp", [&](const std::string& value) { args.amp = examples::parse_amp(value); }},
      {"--optimizer-state",
       [&](const std::string& value) { args.optimizer_state = examples::parse_optimizer_state(value); }},
      {"--seed", [&](const std::string& value) { args.seed = examples::parse_number<uint64_t>("--seed", value); }},
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--threads",
       [&](const std::string& value) { args.threads = static_cast<int>(examples::parse_count("--threads", value)); }},
      {"--eval-interval",
       [&](const std::string& value) { args.eval_interval = examples::parse_count("--eval-interval", value); }},
      {"--eval-iters", [&](const std::string& value) { args.eval_iters = examples::parse_count("--eval-iters", value); }},
      {"--save", [&](const std::string& value) { args.save_path = examples::parse_file_name("--save", value); }},
      {"--resume", [&](const std::string& value) { args.resume_path = examples::parse_file_name("--resume", value); }},
      {"--init-from", [&](const std::string& value) { args.init_from = examples::parse_file_name("--init-from", value); }},
      {"--stop-after", [&](const std::string& value) { args.stop_after = examples::parse_count("--stop-after", value); }},
      {"--summary-json",
       [&](const std::string& value) { args.summary_json = examples::parse_file_name("--summary-json", value); }},
      {"--fit-batch", [&](const std::string& value) { args.fit_batch = examples::parse_bytes("--fit-batch", value); }},
      {"--world-size", [&](const std::string& value) { args.world_size = examples::parse_world_size(value); }},
      {"--save-init",
       [&](const std::string& value) { args.save_init = examples::parse_file_name("--save-init", value); }},
      {"--dump-windows",
       [&](const std::string& value) { args.dump_windows = examples::parse_file_name("--dump-windows", value); }},
      {"--sample", [&](const std::string& value) { args.sample = examples::parse_count("--sample", value); }},
      {"--temperature",
       [&](const std::string& value) {
         args.temperature = examples::parse_positive_real("--temperature", value);
       }},
      {"--top-k",
       [&](const std::string& value) {
         args.top_k = examples::parse_count("--top-k", value);
         if (*args.top_k > kVocabulary) {
           throw UsageError("--top-k must be at most " + std::to_string(kVocabulary) + " (the byte values), got " +
                            value);
         }
       }},
      {"--attention-engine",
       [&](const std::string& value) {
         try {
           args.attention_engine = mg::cuda::parse_attention_engine(value);
         } catch (const mg::Error& error) {
           throw UsageError(std::string("--attention-engine: ") + error.what());
         }
       }},
      {"--prompt",
       [&](const std::string& value) {
         if (value.empty()) throw UsageError("--prompt needs at least one byte for the model to continue");
         args.prompt = value;
       }},
  };
  args.sizes.add_to(flags, /*with_vocab=*/false);
  args.memory_recording.add_to(flags);
  examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
      {"--predict-memory", [&] { args.predict_memory = true; }},
      {"--bench", [&] { args.bench = true; }},
      {"--cuda-graph", [&] { args.cuda_graph = true; }},
      {"--detect-anomaly", [&] { args.detect_anomaly = true; }},
      {"--deterministic", [&] { args.deterministic = true; }},
      {"--distributed", [&] { args.distributed = true; }},
      {"--zero", [&] { args.zero = true; }},
      {"--no-kv-cache", [&] { args.kv_cache = false; }},
  };
  examples::add_out_of_memory_flags(flags, switches, args.out_of_memory);
  examples::add_block_checkpoint_flag(flags, switches, args.checkpoint);
  args.budget.add_to(flags, switches);
  const examples::GivenFlags given = examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;  // the checks below are for a run
  if (!args.threads) args.threads = examples::default_cpu_threads();
  args.distributed = examples::wants_distributed(args.distributed);
  const bool predicting = args.predict_memory || args.fit_batch.has_value();
  const bool dumping = !args.dump_windows.empty();
  examples::check_distributed_flags({.distributed = args.distributed, .zero = args.zero, .cuda_graph = args.cuda_graph,
                                     .predicting = predicting, .world_size = args.world_size});
  examples::refuse_distributed(args.distributed, dumping, "--dump-windows",
                               "it writes the windows of one process's stream");
  examples::check_amp_device(args.amp, args.device);
  examples::check_out_of_memory_flags(args.out_of_memory, args.distributed, args.cuda_graph);
  examples::check_optimizer_state_flags(args.optimizer_state, args.zero, args.cuda_graph);
  examples::check_block_checkpoint(args.checkpoint, args.device);
  examples::check_init_from_flags(args.init_from, args.resume_path,
                                  args.bench                   ? "--bench"
                                  : predicting                 ? "--predict-memory (or --fit-batch)"
                                  : dumping                    ? "--dump-windows"
                                                               : "");
  if (args.detect_anomaly) examples::check_detect_anomaly(args.amp, predicting);
  const mg::nn::GPTOptions options = model_options(args);
  if (options.n_embd % options.n_head != 0) {
    throw UsageError("the width (--embd " + std::to_string(options.n_embd) + ") must be a multiple of the heads (--heads " +
                     std::to_string(options.n_head) + ")");
  }
  // NOTE: --bench captures its whole step, micro-batches included; training captures one
  // micro-batch (examples/common/graphed_step.h), so only training needs --accum 1.
  if (args.attention_engine && !args.device.is_cuda()) {
    throw UsageError("--attention-engine chooses how fused attention runs on CUDA; it changes nothing on " +
                     args.device.str() + ". Hint: add --device cuda, or leave the flag out.");
  }
  examples::check_cuda_graph(args.cuda_graph, args.device, args.bench ? 1 : args.accum,
                             args.memory_recording.any() || predicting || args.detect_anomaly);
  // The flags a mode leaves out (main.cpp: run_training, predict_training_memory,
  // dump_windows; bench.cpp: run_bench, predict_bench_memory); the run's settings (--lr,
  // --eval-iters, --steps, ...) stay welcome with --predict-memory and --dump-windows,
  // which predict the run they describe and draw its windows.
  const std::vector<std::string> sampling = {"--sample", "--temperature", "--top-k", "--prompt", "--no-kv-cache"};
  auto with_sampling = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), sampling.begin(), sampling.end());
    return flags;
  };
  examples::refuse_ignored_flags(
      given,
      {{args.bench,
        with_sampling(examples::with_out_of_memory_flags({"--data", "--lr", "--eval-interval", "--eval-iters", "--save",
                                                          "--resume", "--stop-after", "--save-init", "--dump-windows"})),
        "with --bench: it times steps on random tokens, without a text, a schedule, estimates, checkpoints or "
        "sampling"},
       {dumping,
        with_sampling(examples::with_out_of_memory_flags(examples::with_memory_recording_flags(
            {"--save", "--resume", "--save-init", "--summary-json", "--predict-memory", "--fit-batch",
             "--detect-anomaly", "--cuda-graph"}))),
        "with --dump-windows: it writes the training windows and exits without training"},
       {predicting,
        with_sampling(examples::with_out_of_memory_flags(
            examples::with_memory_recording_flags({"--save", "--resume", "--save-init"}))),
        "with --predict-memory or --fit-batch: they train nothing, and the simulated device's steps are not "
        "recorded"},
       {args.fit_batch.has_value(), {"--predict-memory", "--batch"},
        "with --fit-batch: it searches the batch itself and predicts its peak"},
       {args.sample == 0, {"--temperature", "--top-k", "--prompt", "--no-kv-cache"},
        "without --sample N: they shape the text it prints"}});
  std::vector<std::string> levers_given;
  for (const char* lever : {"--checkpoint", "--optimizer-state", "--accum"}) {
    if (given.has(lever)) levers_given.push_back(lever);
  }
  examples::check_budget_flags(args.budget, levers_given, args.distributed, args.fit_batch.has_value(), args.cuda_graph,
                               args.out_of_memory.auto_accum);
  if (args.bench) {
    if (!given.has("--preset")) args.preset = "gpt2";
    if (!given.has("--steps")) args.steps = 20;
    if (!given.has("--batch")) args.batch_size = 16;
  } else {
    if (args.warmup && *args.warmup > args.steps) {
      throw UsageError("--warmup " + std::to_string(*args.warmup) + " is longer than the run (--steps " +
                       std::to_string(args.steps) + ")");
    }
    if (args.stop_after > args.steps) {
      throw UsageError("--stop-after " + std::to_string(args.stop_after) + " is past the run's end (--steps " +
                       std::to_string(args.steps) + ")");
    }
  }
  if (!args.resume_path.empty() && !args.save_init.empty()) {
    throw UsageError("--save-init writes the weights before step 0; a --resume run starts later");
  }
  std::vector<std::pair<std::string, std::string>> outputs = {{"--save", args.save_path},
                                                              {"--save-init", args.save_init},
                                                              {"--dump-windows", args.dump_windows},
                                                              {"--summary-json", args.summary_json}};
  for (const auto& output : args.memory_recording.outputs()) outputs.push_back(output);
  examples::check_output_paths(outputs);
  return args;
}

mg::nn::GPTOptions model_options(const Args& args) {
  mg::nn::GPTOptions options = args.sizes.apply(preset_options(args.preset));
  options.dropout = args.dropout.value_or(options.dropout);
  options.vocab_size = kVocabulary;
  options.checkpoint = args.checkpoint;
  return options;
}

int64_t warmup_steps(const Args& args) { return args.warmup.value_or(std::min<int64_t>(100, args.steps / 10)); }

int64_t bench_warmup_steps(const Args& args) { return args.warmup.value_or(5); }

std::string usage(const std::string& program) {
  return "usage: " + program + R"( [options]
   or: )" + program + R"( --bench [--preset NAME] [--batch N] [--steps N] [--warmup N] [--accum N]
                [--checkpoint [selective|whole|offload]] [--amp fp16|bf16] [--device cpu|cuda]
                [--optimizer-state device|8bit|offload|offload-delayed]
                [--memory-timeline FILE.html | --cuda-graph]
                [--detect-anomaly | --predict-memory | --fit-batch BYTES]
                [--memory-budget BYTES [--explain-plan]]
                [--distributed [--zero]]  (under mpirun: every rank times its step;
                                           predicting: --world-size N, per rank)

Trains a byte-level GPT (GPT-2's architecture, a vocabulary of the 256 byte values, so no
tokenizer) on UTF-8 text: by default the fortune cookies of Debian's `fortunes` package.
The last 10% of the text's bytes is the validation part; every batch is random windows
of the training part. AdamW (betas 0.9, 0.99; weight decay 0.1 on matrices, none on
biases and norms), a linear warm-up then a cosine decay to a tenth of --lr, gradients
clipped to norm 1. Reports the validation loss, speed and memory; --sample prints text
the model writes.

Data and model:
  --data FILE|DIR          a UTF-8 text file, or a folder whose UTF-8 text files (symlinks
                           followed, each file once, sub-folders and binary files such as
                           fortune's .dat indexes skipped) are joined in name order
                           (default /usr/share/games/fortunes: scripts/install-deps
                           installs it)
  --preset NAME            tiny (2 layers, 2 heads, 64 wide, block 64: seconds on a CPU),
                           small (6 layers, 6 heads, 384 wide, block 256, dropout 0.2:
                           nanoGPT's character-level model; the default), gpt2 (GPT-2
                           124M's sizes: 12 layers, 12 heads, 768 wide, block 1024; 86M
                           parameters with 256 tokens), gpt2-medium (GPT-2 350M's: 24
                           layers, 16 heads, 1024 wide, block 1024; 304M parameters),
                           gpt2-large (774M's: 36 layers, 20 heads, 1280 wide; 709M),
                           gpt2-xl (1.5B's: 48 layers, 25 heads, 1600 wide; 1.48B)
  --layers N --heads N --embd N --block N --dropout P
                           replace single sizes of the preset
  --checkpoint [selective|whole|offload]
                           gradient checkpointing of every block: whole (the flag alone)
                           keeps only each block's input through the forward and
                           recomputes the block in backward (one more forward of the
                           trunk per step, for a lower activation peak); selective also
                           keeps the matmuls' and attention's outputs and recomputes only
                           layer norm, GELU, dropout, softmax and the adds (less compute,
                           more memory); offload keeps what none keeps, in host memory,
                           copied back in backward (--device cuda: two transfers of each
                           saved byte for a GPU's activation memory); none: off (default)

Training:
  --steps N                optimizer steps (default 5000)
  --batch N                windows of --block bytes per batch, per rank when distributed
                           (default 64)
  --accum N                accumulate the gradients of N batches before each optimizer
                           step (default 1): steps of N x --batch windows at the
                           activation memory of one batch
  --lr X                   the schedule's peak learning rate (default 1e-3)
  --warmup N               steps of linear warm-up (default min(100, steps / 10))
  --amp fp16|bf16|fp32     mixed precision: forward under autocast (matmuls in 16 bits,
                           losses and norms in float32, float32 master weights); fp16
                           scales the loss with a GradScaler and needs --device cuda
  --seed N                 seeds initialisation, batches and dropout (default 0)
  --device cpu|cuda        where to run (default cpu)
)" + examples::optimizer_state_usage() + examples::threads_usage() + R"(  --attention-engine own|cudnn|auto
                           --device cuda: fused attention on memgrad's FlashAttention-2
                           kernels (own), cuDNN's fused flash attention (cudnn: an error
                           where it does not apply, e.g. dropout), or per shape the faster
                           of the two, timed at its first call (auto, the default)
  --eval-interval N        estimate the losses every N steps and after the last (default 250)
  --eval-iters N           batches per estimate and split (default 200; the same windows
                           every time, so estimates compare)
)" + examples::cuda_graph_usage() + examples::detect_anomaly_usage() + examples::deterministic_usage() +
         examples::distributed_usage(/*with_zero=*/true) + R"(
Files:
  --save FILE              at every estimate and at the end, write the model, the
                           optimizer and the run's position (one safetensors file,
                           written atomically)
  --resume FILE            continue the run saved in FILE exactly where it stopped (give
                           the same model, --steps, --batch, --accum, --lr and --amp; on
                           as many ranks, exactly; on another number, each rank goes on
                           with its own windows from the saved step)
)" + examples::init_from_usage() + R"(  --stop-after N           end after step N of the --steps the schedule is laid out for
                           (with --save, a later --resume continues the same run)
  --summary-json FILE      write a summary (losses, their history, speed, memory by
                           category) as JSON
)" + examples::memory_recording_usage("the first 3 optimizer\n                           steps (with --bench: of every step run)") + R"(  --save-init FILE         write the model's weights before the first step (a
                           safetensors state_dict: bench/gpt_loss_reference.py starts
                           PyTorch's model from them)
  --dump-windows FILE      write the training windows of the first --steps steps (their
                           first --block bytes, "inputs": (steps, accum x batch, block)
                           int64, safetensors) and exit without training, for
                           gpt_loss_reference.py --check-windows

Out of memory:
)" + examples::kOutOfMemoryUsage + R"(
Sampling, after training (or after --resume of a finished run):
  --sample N               print N bytes the model writes after the prompt
  --temperature T          divide the logits by T (default 0.8; lower: safer text)
  --top-k K                draw only among the K likeliest bytes (default: all 256)
  --prompt TEXT            the text to continue (default a newline)
  --no-kv-cache            recompute the whole window for every byte instead of
                           reading earlier bytes' keys and values from a KV cache
                           (the cache restarts at half the window when it fills)

Benchmark:
  --bench                  time training steps instead: --preset (default gpt2: GPT-2
                           124M, T = 1024) with GPT-2's vocabulary (50257 tokens, the
                           table padded to 50304) on one batch of random tokens, --batch
                           (default 16), --steps timed steps (default 20) after --warmup
                           steps (default 5); a step is --accum micro-batches, clipping
                           and an AdamW step, as in training. Prints the median step
                           time, tokens/s and one step's peak memory, and one JSON line
                           on stdout with bench_train_step's fields
                           (bench/torch_reference.py --model gpt2 is PyTorch's twin)
  --cuda-graph             as in training; 3 warm-up steps, then the replays are timed
)" + examples::budget_usage() + R"(
  --help                   show this text

Predicting memory (with or without --bench; --device names the target, no GPU needed):
)" + examples::prediction_usage() + examples::world_size_usage();
}

}  // namespace gpt
