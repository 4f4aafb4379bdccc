// examples/mnist/args.h — the mnist program's command line: flags, defaults, usage text.
#pragma once
#include "examples/common/auto_accumulation.h"
#include "examples/common/memory_timeline.h"

#include <cstdint>
#include <optional>
#include <string>

#include <memgrad/core/device.h>
#include <memgrad/core/dtype.h>

namespace mnist {

struct Args {
  std::string model = "mlp";  // mlp or cnn
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 0;      // filled from the model's default when --epochs is not given
  int64_t batch_size = 128;  // samples per micro-batch (per rank when distributed)
  int64_t accum = 1;         // micro-batches whose gradients one optimizer step accumulates
  bool checkpoint = false;   // cnn: recompute the convolutions' activations in backward
  bool cuda_graph = false;   // capture the training step once as a CUDA graph and replay it
  std::optional<mg::DType> amp;  // --amp fp16|bf16: autocast dtype; unset: float32
  int64_t limit = 0;         // > 0: about this many training and test samples per epoch
  std::string optimizer = "adam";
  double lr = 0.0;  // filled from the optimizer's default when --lr is not given
  std::string schedule = "cosine";  // how the learning rate moves over the run
  uint64_t seed = 0;
  mg::Device device = mg::Device::cpu();
  std::optional<int> threads;  // unset after parsing: OMP_NUM_THREADS decides (cpu_cores.h)
  std::string summary_json;    // empty: no summary file
  examples::MemoryRecordingFiles memory_recording;  // --memory-timeline, --memory-snapshot, --memory-trace
  std::string save_path;        // --save FILE: a checkpoint after every epoch; empty: none
  std::string init_from;        // --init-from FILE: a new run from a checkpoint's weights
  bool predict_memory = false;      // --predict-memory: predict the peaks on the simulated device
  std::optional<int64_t> fit_batch;  // --fit-batch BYTES: the largest batch that fits
  bool detect_anomaly = false;       // --detect-anomaly: train under autograd's anomaly mode
  bool deterministic = false;  // --deterministic: mg::set_deterministic_algorithms(true)
  // Data-parallel: --distributed, or a launcher's two ranks or more (distributed_run.h).
  bool distributed = false;
  bool zero = false;  // --zero: ZeRO-1 (optimizer state sharded over the ranks)
  std::optional<int> world_size;  // --world-size N: the ranks a distributed prediction is for
  examples::OutOfMemoryFlags out_of_memory;  // --memory-cap, --auto-accum
  bool help = false;
};

// Parses `--flag value` and `--flag=value`; throws examples::UsageError for unknown flags,
// missing or malformed values.
Args parse_args(int argc, char** argv);

std::string usage(const std::string& program);

}  // namespace mnist
