// examples/resnet/args.h — the resnet program's command line: training on Fashion-MNIST
// (the default) or, with --bench, timing training steps on synthetic data.
#pragma once
#include "examples/common/auto_accumulation.h"
#include "examples/common/budget_plan.h"
#include "examples/common/memory_timeline.h"

#include <cstdint>
#include <optional>
#include <string>

#include <memgrad/core/device.h>
#include <memgrad/core/dtype.h>
#include <memgrad/nn/block_checkpoint.h>
#include "examples/common/optimizer_state.h"

namespace resnet {

enum class Optimizer { Sgd, AdamW };

struct Args {
  bool bench = false;
  std::string model = "resnet18";  // --bench only: resnet18 (3x32x32) or resnet50 (3x224x224)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 15;
  int64_t batch_size = 256;  // samples per micro-batch (per rank when distributed)
  int64_t accum = 1;         // micro-batches whose gradients one optimizer step accumulates
  // --checkpoint [selective|whole]: the stem and every block of layer1..layer4
  mg::nn::BlockCheckpoint checkpoint = mg::nn::BlockCheckpoint::None;
  bool cuda_graph = false;   // capture the step once as a CUDA graph and replay it
  double lr = 0.1;  // the one-cycle schedule's peak (1e-3 for AdamW unless given)
  Optimizer optimizer = Optimizer::Sgd;  // --optimizer sgd|adamw
  examples::OptimizerState optimizer_state = examples::OptimizerState::Device;  // --optimizer-state (AdamW)
  bool augment = false;
  bool channels_last = false;  // model and batches in channels-last (NHWC) memory format
  bool cudnn_fusion = true;      // mg::cuda::set_cudnn_fusion (CUDA builds)
  bool cudnn_backward_fusion = true;  // mg::cuda::set_cudnn_backward_fusion (CUDA builds)
  bool cudnn_benchmark = false;  // mg::cuda::set_cudnn_benchmark (CUDA builds)
  bool dependent_launch = false;  // mg::cuda::set_dependent_launch
  // mg::autograd::set_weight_gradients_on_side_stream, with the rest on a high-priority stream
  bool wgrad_stream = false;
  std::optional<mg::DType> amp;  // --amp fp16|bf16: autocast dtype; unset: float32
  uint64_t seed = 0;
  mg::Device device = mg::Device::cpu();
  std::optional<int> threads;  // unset after parsing: OMP_NUM_THREADS decides (cpu_cores.h)
  int64_t limit = 0;           // > 0: about this many training and test samples per epoch
  std::string save_path;       // empty: no checkpoints
  std::string resume_path;     // empty: start afresh
  std::string init_from;       // --init-from FILE: a new run from a checkpoint's weights
  int64_t stop_after = 0;      // > 0: end after this many epochs of the schedule
  std::string summary_json;    // empty: no summary file
  examples::MemoryRecordingFiles memory_recording;  // --memory-timeline, --memory-snapshot, --memory-trace
  bool predict_memory = false;      // --predict-memory: predict the peaks on the simulated device
  std::optional<int64_t> fit_batch;  // --fit-batch BYTES: the largest batch that fits
  bool detect_anomaly = false;       // --detect-anomaly: train (or --bench) under autograd's anomaly mode
  bool deterministic = false;  // --deterministic: mg::set_deterministic_algorithms(true)
  // Data-parallel: --distributed, or a launcher's two ranks or more (distributed_run.h).
  bool distributed = false;
  bool zero = false;           // --zero: ZeRO-1 (SGD's momentum sharded over the ranks)
  std::optional<int> world_size;  // --world-size N: the ranks a distributed prediction is for
  examples::OutOfMemoryFlags out_of_memory;  // --memory-cap, --auto-accum (training only)
  examples::BudgetFlags budget;  // --bench --memory-budget BYTES [--explain-plan] (budget_plan.h)
  std::optional<examples::PlannedStep> planned_step;  // set by --memory-budget's plan (budget_plan.h)
  int64_t steps = 20;          // --bench: timed steps
  int64_t warmup = 5;          // --bench: untimed steps first
  bool help = false;
};

// Parses `--flag value` and `--flag=value`; throws examples::UsageError for unknown flags,
// missing or malformed values, and flags that do not fit the mode.
Args parse_args(int argc, char** argv);

std::string usage(const std::string& program);

}  // namespace resnet
