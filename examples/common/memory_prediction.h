// examples/common/memory_prediction.h — the examples' --predict-memory and --fit-batch:
// run the training steps a command line asks for on the simulated device standing in for
// its --device (memory/simulated_target.h), and read the peaks off the allocator.
//
// The simulated device runs the same caching allocator with the same rounding, pools and
// segment sizes as the CPU and CUDA devices (one algorithm, core/allocator/), the model
// makes the same tensors in the same order, and the simulated kernels borrow the scratch
// the target's kernels would; nothing is computed, so a prediction takes a second or so and
// needs no GPU.
//
// Data-parallel training (DDP, ZeRO-1) is predicted per rank: the steps run as one rank of
// N, their collectives over a SimulatedProcessGroup (memgrad/distributed/
// simulated_process_group.h) that completes at once and allocates what the real backend
// would (NCCL's for a cuda target, MPI's for the CPU). See DistributedPrediction below.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/distributed/process_group.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/tensor.h>

namespace examples {

// Runs a program's training steps with the model, batches and optimizer on `device` and
// `batch_size` samples per batch, and returns the allocator's state afterwards: its peaks
// are what the program's measurement reports (the whole run, or one step after
// reset_peak_stats, as the program measures).
using StepsOnDevice = std::function<mg::memory::Snapshot(mg::Device device, int64_t batch_size)>;

// Which rank of a data-parallel job a prediction is for: the model wrapped in
// DistributedDataParallel over `world_size` ranks, and with `zero` its optimizer ZeRO-1
// (make_zero_redundancy_optimizer with gradients_already_reduced: DDP averages them). The
// batch size is per rank, as in the training run. Every rank holds the same bytes (ZeRO's
// shards are padded to equal size), so `rank` only says which one is reported.
struct DistributedPrediction {
  int world_size = 1;
  int rank = 0;
  bool zero = false;
};
// "rank 1 of 4, DDP, ZeRO-1"
std::string describe(const DistributedPrediction& distributed);

// A data-parallel program's training steps for a prediction: as StepsOnDevice, with the
// process group to train over (rank `rank` of `world_size` on `device`), which the steps
// use exactly where a real run uses its group. The examples run the same steps for a plain
// prediction with no group (predict_or_fit below), and let a DistributedRun made over the
// group wrap the model and build the optimizer as the training run does:
//
//   const examples::DistributedStepsOnDevice steps =
//       [&](mg::Device device, int64_t batch_size, const std::shared_ptr<mg::distributed::ProcessGroup>& group) {
//         examples::DistributedRun run(device, group);  // group nullptr: not distributed
//         std::shared_ptr<mg::nn::Module> model = build_model(args, ..., device);
//         std::shared_ptr<mg::nn::Module> trained = run.wrap(model);   // DDP over `group`
//         auto optimizer = run.make_optimizer<mg::optim::Adam>(trained->parameters(), options, args.zero);
//         ... the steps of a training run, on *trained, with batches of batch_size (per rank) ...
//         return mg::memory::snapshot(device);
//       };
//   const examples::MemoryPrediction prediction = examples::predict_or_fit(
//       args.device, args.batch_size, args.fit_batch, examples::distributed_prediction(args.distributed,
//       args.world_size, args.zero), steps);
//   examples::print_prediction(stdout, prediction, args.fit_batch);  // "per rank (rank 0 of N, DDP, ZeRO-1)"
using DistributedStepsOnDevice = std::function<mg::memory::Snapshot(
    mg::Device device, int64_t batch_size, const std::shared_ptr<mg::distributed::ProcessGroup>& group)>;

struct MemoryPrediction {
  mg::Device target;        // the device predicted for (cpu or cuda)
  int64_t batch_size = 0;   // per rank when distributed
  mg::memory::Snapshot memory;  // on the simulated device: peaks and category peaks
  // What a CUDA target's run keeps in host memory (an offloaded optimizer's state, master
  // weights and gradient copies), on the simulated host (memory/simulated_target.h); all
  // zero when it keeps nothing there, and for a CPU target, whose host is `memory`.
  mg::memory::Snapshot host;
  std::string scratch_model;    // how the target's kernel scratch was modelled
  std::optional<DistributedPrediction> distributed;  // set for a data-parallel prediction
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
// The same for one rank of a data-parallel job: `steps` get a SimulatedProcessGroup as
// rank distributed.rank of distributed.world_size on the simulated device, mirroring NCCL
// for a cuda target and MPI for the CPU. Throws mg::Error for a world size below 1 or a
// rank outside it.
MemoryPrediction predict_memory(mg::Device target, int64_t batch_size, const DistributedPrediction& distributed,
                                const DistributedStepsOnDevice& steps);

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
// The same for one rank of a data-parallel job: the largest batch per rank.
MemoryPrediction fit_batch(mg::Device target, int64_t capacity_bytes, const DistributedPrediction& distributed,
                           const DistributedStepsOnDevice& steps, int64_t max_batch = int64_t{1} << 24);

// A program's --predict-memory (no fit_capacity) or --fit-batch: with `distributed`, for
// that rank of a data-parallel job (the overloads above), else for one process, `steps`
// then getting no group (nullptr).
MemoryPrediction predict_or_fit(mg::Device target, int64_t batch_size, std::optional<int64_t> fit_capacity,
                                const std::optional<DistributedPrediction>& distributed,
                                const DistributedStepsOnDevice& steps, int64_t max_batch = int64_t{1} << 24);

// What a command line's prediction is for: rank 0 of `world_size` (--world-size, 1 when not
// given) with --distributed, with `zero` ZeRO-1; nothing (one process) without it.
std::optional<DistributedPrediction> distributed_prediction(bool distributed, std::optional<int> world_size,
                                                            bool zero);

// " per rank on N ranks" for a data-parallel prediction's set-up line; empty for one process.
std::string per_rank_phrase(const std::optional<DistributedPrediction>& distributed);
// The most samples a batch per rank can hold: a rank's (padded) shard of `dataset_size`
// samples, or all of them for one process (a --fit-batch search's max_batch).
int64_t largest_batch_per_rank(int64_t dataset_size, const std::optional<DistributedPrediction>& distributed);

// A size flag's value (--fit-batch, --memory-budget, --memory-cap): a byte count, plain
// ("1073741824") or with a unit: KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers
// of 1000), B; with a unit above B a decimal fraction too ("2.5GiB"), rounded down to a whole
// byte. Throws UsageError naming `flag` for anything else, zero, or a count beyond 2^62.
int64_t parse_bytes(const std::string& flag, const std::string& text);

// Prints the prediction (peaks, per-category peaks, host memory where any, the scratch
// model) to `out`, with the
// --fit-batch capacity when one was searched for; a data-parallel one says "per rank
// (rank r of N, DDP[, ZeRO-1])".
void print_prediction(std::FILE* out, const MemoryPrediction& prediction,
                      std::optional<int64_t> fit_capacity = std::nullopt);

// Writes {"prediction": {...}, "memory": {...}} members into an open JSON object: the
// memory section in the shape of a measured run's (peak_allocated_bytes,
// peak_reserved_bytes, peak_bytes_by_category, ...), "host_memory" in the same shape when
// the run keeps bytes in host memory, and what says it is a prediction,
// for which target, with which scratch model (and the --fit-batch capacity; for a
// data-parallel one "distributed": {"world_size", "rank", "ddp", "zero"}).
void write_prediction_json(mg::JsonWriter& json, const MemoryPrediction& prediction,
                           std::optional<int64_t> fit_capacity = std::nullopt);

// A training program's --summary-json for a prediction: one JSON object holding the run's
// set-up (what `write_setup` writes) and write_prediction_json's members, written
// atomically to `path`; says where on stdout.
void write_prediction_summary(const std::string& path, const MemoryPrediction& prediction,
                              std::optional<int64_t> fit_capacity,
                              const std::function<void(mg::JsonWriter&)>& write_setup);

// A --bench run's --predict-memory / --fit-batch: predicts for `target` at `batch_size`
// (or finds the batch that fits fit_capacity) through predict_or_fit, so with `distributed`
// for that rank of a --bench --distributed job (the bench's step over the group `steps`
// get), prints it to stderr for people, and writes one JSON line, the run's set-up
// (write_config, given the predicted batch) then the prediction, to stdout for
// bench/summarize.py and atomically to summary_json when given.
void print_bench_prediction(mg::Device target, int64_t batch_size, std::optional<int64_t> fit_capacity,
                            const std::optional<DistributedPrediction>& distributed,
                            const DistributedStepsOnDevice& steps, const std::string& summary_json,
                            const std::function<void(mg::JsonWriter&, int64_t batch_size)>& write_config);

// --predict-memory's and --fit-batch's help lines, the same in every program.
std::string prediction_usage();

}  // namespace examples
