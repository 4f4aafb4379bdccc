// examples/common/step_benchmark.cpp — the warm-up, peak-memory and timed loops of a step
// benchmark, and every rank's figures in a data-parallel one.
#include "examples/common/step_benchmark.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <memgrad/core/factory.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/cuda/cuda.h>
#include "examples/common/memory_report.h"
#include "examples/common/timeline.h"

namespace examples {
namespace {

// Waits until the device is idle and, in a distributed run, until every rank is: the next
// step starts together on all ranks.
void settle(mg::Device device, const DistributedRun* run) {
  Timeline::synchronize(device);
  if (run == nullptr || !run->active()) return;
  run->group()->barrier()->wait();
  Timeline::synchronize(device);  // on NCCL, wait() made the stream wait, not the host
}

// "0.80, 2.10" for a list of ms.
std::string join_ms(const std::vector<double>& values) {
  std::string text;
  char number[32];
  for (const double value : values) {
    std::snprintf(number, sizeof number, "%.2f", value);
    text += (text.empty() ? "" : ", ") + std::string(number);
  }
  return text;
}

// DDP's overlap of the all-reduces with backward, from the host's timeline of the last
// synchronising backward (BackwardTimeline).
void print_backward_timeline(std::FILE* out, const mg::distributed::BackwardTimeline& timeline) {
  if (timeline.bucket_launch_ms.empty()) return;
  std::vector<double> overlapping;
  std::vector<double> at_end;
  for (const double launch : timeline.bucket_launch_ms) {
    (launch < timeline.last_gradient_ms ? overlapping : at_end).push_back(launch);
  }
  // NOTE: the buckets launched at or after the last gradient (the last one always) had only
  // the end of backward to overlap with.
  const std::string before = overlapping.empty() ? "" : " (at " + join_ms(overlapping) + " ms)";
  std::fprintf(out, "DDP: %zu buckets; %zu launched before backward's last gradient%s of a %.2f ms backward, "
               "%zu at its end (%s ms); the all-reduces waited for at %.2f ms. Host issue times from the first "
               "gradient: on a GPU the device runs behind them\n",
               timeline.bucket_launch_ms.size(), overlapping.size(), before.c_str(), timeline.backward_end_ms,
               at_end.size(), join_ms(at_end).c_str(), timeline.reduced_ms);
}

}  // namespace

StepMeasurement measure_peak_step(mg::Device device, int64_t warmup, const std::function<void()>& step,
                                  const DistributedRun* run) {
  using Clock = std::chrono::steady_clock;
  for (int64_t i = 0; i < warmup; ++i) step();
  settle(device, run);
  mg::memory::reset_peak_stats(device);
  const Clock::time_point issue_start = Clock::now();
  step();
  const double host_issue_ms = std::chrono::duration<double, std::milli>(Clock::now() - issue_start).count();
  Timeline::synchronize(device);
  return {.host_issue_ms = host_issue_ms,
          .memory = mg::memory::snapshot(device),
          .pinned_host = device.is_cuda() ? mg::memory::pinned_host_snapshot() : mg::memory::Snapshot{}};
}

StepMeasurement measure_costed_peak_step(mg::Device device, int64_t warmup, const std::function<void()>& step,
                                         const DistributedRun* run, mg::memory::StepCost* cost,
                                         const mg::memory::DeviceRates& rates) {
  std::optional<mg::memory::StepCostMeter> meter;
  int64_t steps = 0;
  const StepMeasurement measurement = measure_peak_step(
      device, warmup,
      [&] {
        if (steps++ == warmup) meter.emplace(rates);
        step();
      },
      run);
  *cost = meter->cost();
  return measurement;
}

StepMeasurement measure_steps(mg::Device device, int64_t warmup, int64_t steps, const std::function<void()>& step,
                              const DistributedRun* run) {
  using Clock = std::chrono::steady_clock;
  StepMeasurement measurement = measure_peak_step(device, warmup, step, run);

  Timeline timeline(device, steps + 1);
  settle(device, run);
  std::optional<mg::cuda::ProfilerRange> profiled;  // the timed steps alone, for a profiler
  if (device.is_cuda()) profiled.emplace();
  const Clock::time_point loop_start = Clock::now();
  timeline.mark();
  for (int64_t i = 0; i < steps; ++i) {
    step();
    timeline.mark();
  }
  Timeline::synchronize(device);
  profiled.reset();
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
  const mg::memory::Snapshot& host = measurement.pinned_host;
  if (host.peak_requested_bytes == 0) return;
  json.key("pinned_host_peak_bytes_by_category").begin_object();
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    json.key(mg::category_name(static_cast<mg::MemoryCategory>(c))).value(host.by_category[c].peak);
  }
  json.end_object();
}

double RankFigures::slowest_median_ms() const { return median_ms.at(slowest_rank()); }

int RankFigures::slowest_rank() const {
  return static_cast<int>(std::max_element(median_ms.begin(), median_ms.end()) - median_ms.begin());
}

RankFigures gather_rank_figures(const DistributedRun& run, const StepMeasurement& own) {
  RankFigures figures{.median_ms = {own.median_ms}, .peaks = run.peaks_by_rank()};
  if (!run.active()) return figures;
  const mg::Device device = run.group()->device();
  const mg::Tensor mine = mg::from_vector(std::vector<double>{own.median_ms}, {1}).to(device);
  const mg::Tensor all = mg::empty({run.size()}, {.dtype = mg::DType::Float64, .device = device});
  run.group()->all_gather(all, mine)->wait();
  figures.median_ms = all.to(mg::Device::cpu()).to_vector<double>();
  return figures;
}

void write_rank_fields(mg::JsonWriter& json, const DistributedRun& run, bool zero, const RankFigures& ranks) {
  json.key("world_size").value(static_cast<int64_t>(run.size())).key("zero").value(zero);
  if (!run.active()) return;
  // NOTE: the names of bench/torch_reference.py --ddp's fields, for a side-by-side run.
  json.key("per_rank_step_ms_median").begin_array();
  for (const double median : ranks.median_ms) json.value(median);
  json.end_array().key("per_rank_peak_allocated_bytes").begin_array();
  for (const mg::memory::Snapshot& peaks : ranks.peaks) json.value(peaks.peak_allocated_bytes);
  json.end_array().key("slowest_rank_step_ms_median").value(ranks.slowest_median_ms());
  write_peaks_by_rank(json, ranks.peaks);
  if (run.ddp() == nullptr) return;
  // Rank 0's host timeline of the last timed step's synchronising backward.
  const mg::distributed::BackwardTimeline& timeline = run.ddp()->last_backward_timeline();
  json.key("ddp_bucket_launch_ms").begin_array();
  for (const double launch : timeline.bucket_launch_ms) json.value(launch);
  json.end_array()
      .key("ddp_last_gradient_ms").value(timeline.last_gradient_ms)
      .key("ddp_backward_end_ms").value(timeline.backward_end_ms)
      .key("ddp_reduced_ms").value(timeline.reduced_ms);
}

std::string describe_ranks(const DistributedRun& run, bool zero) {
  if (!run.active()) return "";
  return ", rank " + std::to_string(run.rank()) + " of " + run.describe() + (zero ? " (DDP, ZeRO-1" : " (DDP") +
         "; batch per rank, samples/s of the job)";
}

void print_rank_figures(std::FILE* out, const DistributedRun& run, const RankFigures& ranks) {
  if (!run.active()) return;
  std::fprintf(out, "%s: the slowest rank's median step %.2f ms (rank %d)\n", run.describe().c_str(),
               ranks.slowest_median_ms(), ranks.slowest_rank());
  print_peaks_by_rank(out, ranks.peaks);
  if (run.ddp() != nullptr) print_backward_timeline(out, run.ddp()->last_backward_timeline());
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
