// examples/common/step_benchmark.cpp — the warm-up, peak-memory and timed loops of a step benchmark.
#include "examples/common/step_benchmark.h"

#include <chrono>
#include <utility>
#include <vector>

#include <memgrad/core/memory_category.h>
#include "examples/common/timeline.h"

namespace examples {

StepMeasurement measure_steps(mg::Device device, int64_t warmup, int64_t steps, const std::function<void()>& step) {
  using Clock = std::chrono::steady_clock;
  for (int64_t i = 0; i < warmup; ++i) step();
  Timeline::synchronize(device);
  mg::memory::reset_peak_stats(device);
  const Clock::time_point issue_start = Clock::now();
  step();
  const double host_issue_ms = std::chrono::duration<double, std::milli>(Clock::now() - issue_start).count();
  Timeline::synchronize(device);
  StepMeasurement measurement{.host_issue_ms = host_issue_ms, .memory = mg::memory::snapshot(device)};

  Timeline timeline(device, steps + 1);
  const Clock::time_point loop_start = Clock::now();
  timeline.mark();
  for (int64_t i = 0; i < steps; ++i) {
    step();
    timeline.mark();
  }
  Timeline::synchronize(device);
  const double loop_ms = std::chrono::duration<double, std::milli>(Clock::now() - loop_start).count();
  const std::vector<double> step_ms = timeline.intervals_ms();
  measurement.median_ms = quantile(step_ms, 0.5);
  measurement.p10_ms = quantile(step_ms, 0.1);
  measurement.p90_ms = quantile(step_ms, 0.9);
  measurement.mean_ms = loop_ms / static_cast<double>(steps);
  return measurement;
}

void write_step_fields(mg::JsonWriter& json, const StepMeasurement& measurement, int64_t batch_size) {
  const mg::memory::Snapshot& memory = measurement.memory;
  json.key("step_ms_median").value(measurement.median_ms)
      .key("step_ms_p10").value(measurement.p10_ms)
      .key("step_ms_p90").value(measurement.p90_ms)
      .key("mean_ms").value(measurement.mean_ms)
      .key("host_issue_ms").value(measurement.host_issue_ms)
      .key("samples_per_s").value(measurement.samples_per_s(batch_size))
      .key("peak_allocated_bytes").value(memory.peak_allocated_bytes)
      .key("peak_reserved_bytes").value(memory.peak_reserved_bytes)
      .key("peak_bytes_by_category").begin_object();
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    json.key(mg::category_name(static_cast<mg::MemoryCategory>(c))).value(memory.by_category[c].peak);
  }
  json.end_object();
}

std::function<void()> replay_or(std::optional<mg::cuda::CapturedStep>& captured, std::function<void()> step) {
  return [&captured, step = std::move(step)] {
    if (captured) {
      captured->replay();
    } else {
      step();
    }
  };
}

}  // namespace examples
