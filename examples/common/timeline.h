// examples/common/timeline.h — timing steps on a device's own timeline, for benchmarks:
// marks are CUDA events on the current stream (so the host never waits inside a timed
// loop, and a step's time is what the GPU timeline shows, host gaps included) or the
// host's steady clock on the CPU; intervals are read once, afterwards.
// Shared by bench/train_step.cpp and the examples' --bench modes, so that memgrad's
// figures are always measured the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <memgrad/core/device.h>

#ifdef MG_WITH_CUDA
#include <memgrad/cuda/runtime.h>
#endif

namespace examples {

class Timeline {
 public:
  // Room for `marks` marks (CUDA events are created and recorded once here, so that the
  // timed steps do not pay for that).
  Timeline(mg::Device device, int64_t marks);

  // Marks the point the device has reached in its queue of work, without waiting for it.
  void mark();
  // Milliseconds between consecutive marks; waits for the device.
  std::vector<double> intervals_ms() const;

  // Waits until everything issued to `device` so far has run (nothing on the CPU).
  static void synchronize(mg::Device device);

 private:
  using Clock = std::chrono::steady_clock;

  mg::Device device_;
  int64_t marks_ = 0;
#ifdef MG_WITH_CUDA
  std::vector<mg::cuda::Event> events_;
#endif
  std::vector<Clock::time_point> host_marks_;
};

// The q-quantile of `values` with linear interpolation between the two nearest ranks
// (NumPy's default, which bench/torch_reference_harness.py uses too).
double quantile(std::vector<double> values, double q);

}  // namespace examples
