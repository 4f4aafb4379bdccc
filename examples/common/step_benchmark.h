// examples/common/step_benchmark.h — how memgrad's benchmarks measure a training step, so
// that bench_train_step and the examples' --bench modes report the same figures, measured
// the same way as bench/torch_reference.py: after `warmup` untimed steps, one step from
// reset_peak_stats() gives the step's peak memory (from the state a step starts in:
// parameters, optimizer state, the batch) and the host's time to issue a step, then `steps` steps are marked on the device's
// timeline (examples/common/timeline.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <memgrad/core/device.h>
#include <memgrad/cuda/captured_step.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>

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

  double samples_per_s(int64_t batch_size) const { return static_cast<double>(batch_size) / (mean_ms / 1000.0); }
};

// Runs `step` (which issues a full training step and does not wait for the device)
// warmup + 1 + steps times and measures it as above.
StepMeasurement measure_steps(mg::Device device, int64_t warmup, int64_t steps, const std::function<void()>& step);

// What a --cuda-graph benchmark times: replays of `captured` when it holds a step captured
// as a CUDA graph, else `step` itself. `captured` must outlive the returned function.
std::function<void()> replay_or(std::optional<mg::cuda::CapturedStep>& captured, std::function<void()> step);

// Adds the measured members of bench_train_step's JSON line to an open object, from
// "step_ms_median" to "peak_bytes_by_category".
void write_step_fields(mg::JsonWriter& json, const StepMeasurement& measurement, int64_t batch_size);

}  // namespace examples
