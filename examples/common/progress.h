// examples/common/progress.h — training progress on stderr: on a terminal one line that
// updates in place (at most ~10 times a second), otherwise a plain line every ~10% of the
// batches, so logs stay short. The epoch loop counts an epoch's batches and samples
// ("epoch 2/15 [###.......] 120/469  loss 0.4210  5210 samples/s  mem 41.2/64.0 MiB
// ACTIVATION 20.1  ETA 0:08"); the GPT example counts a run's steps and tokens ("step
// [###.......] 1500/5000  loss 1.3012  81234 tokens/s  mem 1.21/1.50 GiB ACTIVATION 0.80
// ETA 2:51"). "mem" is the training device's memory as the line is printed: bytes
// allocated / reserved by the caching allocator, and the category holding the most (the
// tutorials' `nvidia-smi -l 1`, by category).
//
// NOTE: the caller asks wants_update() before reading the loss: reading it copies it to
// the host, which on a GPU waits for the step to finish; doing that only when a line is
// printed keeps the training loop free of synchronisations. The memory figures are the
// allocator's host-side counters (mg::memory::snapshot), read without a synchronisation:
// they count what the host has issued, which is what the allocator has handed out.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <memgrad/core/device.h>
#include <memgrad/memory/snapshot.h>

namespace examples {

// "mem 41.2/64.0 MiB ACTIVATION 20.1": allocated / reserved and the largest category's
// current bytes, in the unit that suits the reserved bytes (KiB, MiB or GiB).
std::string memory_figures(const mg::memory::Snapshot& snapshot);

class Progress {
 public:
  // Epoch `epoch` of `epochs` (from 1), counting samples, training on `device`.
  Progress(int64_t epoch, int64_t epochs, int64_t num_batches, mg::Device device);
  // `title` before the bar, `unit` per second; a run resumed after `first_batch` of its
  // `num_batches` times and counts only the batches it runs itself.
  Progress(std::string title, int64_t num_batches, std::string unit, mg::Device device, int64_t first_batch = 0);

  // Whether a line is due after `batches_done` batches (the last one always is).
  bool wants_update(int64_t batches_done) const;
  // `units_done`: samples (or tokens) since this Progress began.
  void update(int64_t batches_done, int64_t units_done, double average_loss);
  // Clears the terminal line so that the epoch's summary takes its place.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;

  std::string title_;
  std::string unit_;
  mg::Device device_;  // whose memory the line shows
  int64_t num_batches_;
  int64_t first_batch_;
  bool interactive_;
  int64_t batches_per_line_;  // when not interactive
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_update_;
};

}  // namespace examples
