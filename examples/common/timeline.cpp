// examples/common/timeline.cpp — device-timeline marks and quantiles.
#include "examples/common/timeline.h"

#include <algorithm>
#include <cmath>

namespace examples {

Timeline::Timeline(mg::Device device, int64_t marks) : device_(device) {
#ifdef MG_WITH_CUDA
  if (device_.is_cuda()) {
    events_.reserve(marks);
    for (int64_t i = 0; i < marks; ++i) events_.emplace_back(/*enable_timing=*/true);
    // NOTE: an Event creates its CUDA event at its first record(); recording each once
    // here keeps that cost out of the timed steps.
    const mg::cuda::Stream stream = mg::cuda::Stream::current(device_);
    for (mg::cuda::Event& event : events_) event.record(stream);
    synchronize(device_);
    return;
  }
#endif
  host_marks_.reserve(marks);
}

void Timeline::mark() {
#ifdef MG_WITH_CUDA
  if (device_.is_cuda()) {
    events_.at(marks_++).record(mg::cuda::Stream::current(device_));
    return;
  }
#endif
  host_marks_.push_back(Clock::now());
  ++marks_;
}

std::vector<double> Timeline::intervals_ms() const {
  synchronize(device_);
  std::vector<double> intervals;
  for (int64_t i = 1; i < marks_; ++i) {
#ifdef MG_WITH_CUDA
    if (device_.is_cuda()) {
      intervals.push_back(mg::cuda::Event::elapsed_ms(events_[i - 1], events_[i]));
      continue;
    }
#endif
    intervals.push_back(std::chrono::duration<double, std::milli>(host_marks_[i] - host_marks_[i - 1]).count());
  }
  return intervals;
}

void Timeline::synchronize(mg::Device device) {
#ifdef MG_WITH_CUDA
  if (device.is_cuda()) mg::cuda::synchronize(device);
#endif
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

}  // namespace examples
