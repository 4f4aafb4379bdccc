// tests/cuda/gpu_timing.h — what the hidden timing cases share ("[bn-timing]",
// "[fusion-timing]"): the GPU time of a piece of work, without the host's launch latency.
// They assert nothing about speed (a shared or throttled GPU would fail them); they are run
// by hand or by scripts/gpu-check.
//
// Timing one launch between two events counts the host's time to queue it where the GPU
// waits for the host, which for a 20 µs kernel behind a cuDNN call's host work can be most
// of the figure. Here a long copy is queued first, so that every repeat is queued before
// the first event is reached, as in a training step that keeps the GPU busy.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/runtime.h"

namespace gpu_timing {

// How many launches each timing averages (MG_TIMING_REPEATS, default 20).
inline int repeats() {
  const char* repeats = std::getenv("MG_TIMING_REPEATS");
  return repeats != nullptr ? std::max(1, std::atoi(repeats)) : 20;
}

// Median milliseconds of `run` on the current stream, per repeat, over 7 trials of
// repeats() runs each (1 trial when repeats() is 1, as under Nsight Compute), after one
// untimed run (plan choice, kernel loading).
template <class Run>
double median_ms(Run&& run) {
  using namespace mg;
  const Device device = Device::cuda();
  const cuda::Stream stream = cuda::Stream::current(device);
  const TensorOptions bytes{.dtype = DType::UInt8, .device = device};
  const Tensor filler_from = empty({int64_t{1} << 31}, bytes), filler_to = empty({int64_t{1} << 31}, bytes);
  const int count = repeats();
  const int trials = count == 1 ? 1 : 7;
  run();
  std::vector<double> times;
  for (int trial = 0; trial < trials; ++trial) {
    cudaMemcpyAsync(filler_to.raw_data(), filler_from.raw_data(), filler_from.nbytes(), cudaMemcpyDeviceToDevice,
                    stream.handle());
    cuda::Event start(true), end(true);
    start.record(stream);
    for (int i = 0; i < count; ++i) run();
    end.record(stream);
    end.synchronize();
    times.push_back(cuda::Event::elapsed_ms(start, end) / count);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace gpu_timing
