// examples/common/step_benchmark.h — how memgrad's benchmarks measure a training step, so
// that bench_train_step and the examples' --bench modes report the same figures, measured
// the same way as bench/torch_reference.py: after `warmup` untimed steps, one step from
// reset_peak_stats() gives the step's peak memory (from the state a step starts in:
// parameters, optimizer state, the batch) and the host's time to issue a step, then `steps` steps are marked on the device's
// timeline (examples/common/timeline.h).
//
// Data-parallel (--bench --distributed): every rank measures its own step (the model in
// DDP, so each step includes the gradients' all-reduce), lined up with the others by a
// barrier before the peak-memory step and before the timed loop, so that no rank's timing
// starts by waiting for a late one. The ranks run in lockstep (each all-reduce waits for
// all), so rank 0's median is the job's step; gather_rank_figures adds every rank's median
// and peaks by category, which rank 0 reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/cuda/captured_step.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/memory/step_cost.h>
#include "examples/common/distributed_run.h"

namespace examples {

struct StepMeasurement {
  // Quantiles of the timed steps' intervals on the device's timeline.
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  // The timed loop's wall time divided by its steps (host gaps and queueing included).
  double mean_ms = 0;
  // The host's time to issue one step to an idle device (the peak-memory step, up to the
  // return of `step`, before waiting for it): when it is near median_ms, the step is bound
  // by the host, not the GPU.
  double host_issue_ms = 0;
  // The allocator's state after the one measured step: its peaks are that step's.
  mg::memory::Snapshot memory;
  // A GPU run's pinned host memory after that step (an offloaded optimizer's state, SaveOnCpu's
  // activations); empty on the CPU, where the host is the device.
  mg::memory::Snapshot pinned_host;

  double samples_per_s(int64_t batch_size) const { return static_cast<double>(batch_size) / (mean_ms / 1000.0); }
};

// Runs `step` (which issues a full training step and does not wait for the device)
// warmup + 1 + steps times and measures it as above. With `run` distributed, every rank
// calls it, and a barrier lines the ranks up before the peak-memory step and the timed loop.
StepMeasurement measure_steps(mg::Device device, int64_t warmup, int64_t steps, const std::function<void()>& step,
                              const DistributedRun* run = nullptr);
// measure_steps's first part: the `warmup` steps, the barrier (when `run` is distributed),
// and the peak-memory step; only host_issue_ms and memory are set. A --bench prediction
// runs exactly this on the simulated device (over a SimulatedProcessGroup for a
// distributed one), so that its peaks are the measured step's.
StepMeasurement measure_peak_step(mg::Device device, int64_t warmup, const std::function<void()>& step,
                                  const DistributedRun* run = nullptr);

// measure_peak_step, with the peak-memory step (not the warm-up) also costed on `rates` into
// `cost` (memory/step_cost.h: meaningful where `device` is the simulated one).
StepMeasurement measure_costed_peak_step(mg::Device device, int64_t warmup, const std::function<void()>& step,
                                         const DistributedRun* run, mg::memory::StepCost* cost,
                                         const mg::memory::DeviceRates& rates);

// Every rank's figures of a data-parallel step benchmark, in rank order.
struct RankFigures {
  std::vector<double> median_ms;            // each rank's median step
  std::vector<mg::memory::Snapshot> peaks;  // each rank's peaks by category since the
                                            // peak-memory step (it and the timed steps)
  // The slowest rank's median and that rank.
  double slowest_median_ms() const;
  int slowest_rank() const;
};

// Gathers every rank's median and peaks (collectives: every rank calls it, after
// measure_steps); a run that is not distributed gets this process's alone.
RankFigures gather_rank_figures(const DistributedRun& run, const StepMeasurement& own);

// What a --cuda-graph benchmark times: replays of `captured` when it holds a step captured
// as a CUDA graph, else `step` itself. `captured` must outlive the returned function.
std::function<void()> replay_or(std::optional<mg::cuda::CapturedStep>& captured, std::function<void()> step);

// Adds the measured members of bench_train_step's JSON line to an open object, from
// "step_ms_median" to "peak_bytes_by_category" (this rank's), then "pinned_host_peak_bytes_by_category"
// where a GPU run pinned host memory. `batch_size`: the samples a
// step takes over all ranks, so that "samples_per_s" is the whole job's.
void write_step_fields(mg::JsonWriter& json, const StepMeasurement& measurement, int64_t batch_size);

// "world_size" and "zero"; for a distributed run also "per_rank_step_ms_median" and
// "per_rank_peak_allocated_bytes" (as bench/torch_reference.py --ddp names them),
// "slowest_rank_step_ms_median" and every rank's peaks by category ("memory_per_rank",
// memory_report.h's), to an open object; and rank 0's host timeline of the last timed
// step's synchronising backward (DistributedDataParallel::last_backward_timeline):
// "ddp_bucket_launch_ms" (per bucket), "ddp_last_gradient_ms", "ddp_backward_end_ms" and
// "ddp_reduced_ms".
void write_rank_fields(mg::JsonWriter& json, const DistributedRun& run, bool zero, const RankFigures& ranks);

// ", rank 0 of 2 ranks over nccl (DDP, ZeRO-1; batch per rank, samples/s of the job)" for a
// bench's line; empty when not distributed.
std::string describe_ranks(const DistributedRun& run, bool zero);

// For a distributed run, the slowest rank's median, the per-rank peaks table and a line on
// DDP's overlap of the all-reduces with backward (when each bucket was launched against
// backward's last gradient, on the host), to `out`; nothing otherwise.
void print_rank_figures(std::FILE* out, const DistributedRun& run, const RankFigures& ranks);

}  // namespace examples
