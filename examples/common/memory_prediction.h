// examples/common/memory_prediction.h — the examples' --predict-memory and --fit-batch:
// run the training steps a command line asks for on the simulated device standing in for
// its --device (memory/simulated_target.h), and read the peaks off the allocator.
//
// The simulated device runs the same caching allocator with the same rounding, pools and
// segment sizes as the CPU and CUDA devices (one algorithm, core/allocator/), the model
// makes the same tensors in the same order, and the simulated kernels borrow the scratch
// the target's kernels would; nothing is computed, so a prediction takes a second or so and
// needs no GPU.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/tensor.h>

namespace examples {

// Runs a program's training steps with the model, batches and optimizer on `device` and
// `batch_size` samples per batch, and returns the allocator's state afterwards: its peaks
// are what the program's measurement reports (the whole run, or one step after
// reset_peak_stats, as the program measures).
using StepsOnDevice = std::function<mg::memory::Snapshot(mg::Device device, int64_t batch_size)>;

struct MemoryPrediction {
  mg::Device target;        // the device predicted for (cpu or cuda)
  int64_t batch_size = 0;
  mg::memory::Snapshot memory;  // on the simulated device: peaks and category peaks
  std::string scratch_model;    // how the target's kernel scratch was modelled
};

// Optimizer steps a training-mode prediction runs: the first creates the optimizer's
// state, the second is the steady state every later step repeats; one more makes sure.
inline constexpr int64_t kPredictedSteps = 3;

// Tensors of the same sizes, dtypes and memory categories as `tensors`, on `device`: what
// data kept elsewhere in a prediction (a dataset in host memory) occupies on the target
// when the target is where it lives.
std::vector<mg::Tensor> placeholders_on(mg::Device device, std::initializer_list<mg::Tensor> tensors);

// Runs `steps` on a fresh simulated device, with room to spare (2^50 bytes), standing in
// for `target`.
MemoryPrediction predict_memory(mg::Device target, int64_t batch_size, const StepsOnDevice& steps);

// The largest batch (up to max_batch) whose predicted peak RESERVED bytes fit in
// `capacity_bytes`: reserved, because the caching allocator takes whole segments from the
// device and keeps freed blocks cached in them. (Conservative: on a device that full the
// allocator would free its cache and retry before failing, so a slightly larger batch
// may still run, paying for the frees.) Assumes memory grows with the batch (every
// activation is proportional to it), so a doubling search and a bisection find it in
// O(log batch) predictions; the result's batch fits and batch + 1 does not (unless it is
// max_batch). Throws mg::Error, saying what one sample needs, when not even that fits.
MemoryPrediction fit_batch(mg::Device target, int64_t capacity_bytes, const StepsOnDevice& steps,
                           int64_t max_batch = int64_t{1} << 24);

// --fit-batch's value: a byte count, plain ("1073741824") or with a unit: KiB, MiB, GiB,
// TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), B. Throws UsageError naming
// `flag` for anything else, zero, or a count beyond 2^62.
int64_t parse_bytes(const std::string& flag, const std::string& text);

// Prints the prediction (peaks, per-category peaks, the scratch model) to `out`, with the
// --fit-batch capacity when one was searched for.
void print_prediction(std::FILE* out, const MemoryPrediction& prediction,
                      std::optional<int64_t> fit_capacity = std::nullopt);

// Writes {"prediction": {...}, "memory": {...}} members into an open JSON object: the
// memory section in the shape of a measured run's (peak_allocated_bytes,
// peak_reserved_bytes, peak_bytes_by_category, ...), and what says it is a prediction,
// for which target, with which scratch model (and the --fit-batch capacity).
void write_prediction_json(mg::JsonWriter& json, const MemoryPrediction& prediction,
                           std::optional<int64_t> fit_capacity = std::nullopt);

// A training program's --summary-json for a prediction: one JSON object holding the run's
// set-up (what `write_setup` writes) and write_prediction_json's members, written
// atomically to `path`; says where on stdout.
void write_prediction_summary(const std::string& path, const MemoryPrediction& prediction,
                              std::optional<int64_t> fit_capacity,
                              const std::function<void(mg::JsonWriter&)>& write_setup);

// A --bench run's --predict-memory / --fit-batch: predicts for `target` at `batch_size`
// (or finds the batch that fits fit_capacity), prints it to stderr for people, and writes
// one JSON line, the run's set-up (write_config, given the predicted batch) then the
// prediction, to stdout for bench/summarize.py and atomically to summary_json when given.
void print_bench_prediction(mg::Device target, int64_t batch_size, std::optional<int64_t> fit_capacity,
                            const StepsOnDevice& steps, const std::string& summary_json,
                            const std::function<void(mg::JsonWriter&, int64_t batch_size)>& write_config);

// --predict-memory's and --fit-batch's help lines, the same in every program.
std::string prediction_usage();

}  // namespace examples
