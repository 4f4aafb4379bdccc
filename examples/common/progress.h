// examples/common/progress.h — training progress on stderr: on a terminal one line that
// updates in place (at most ~10 times a second), otherwise a plain line every ~10% of the
// epoch, so logs stay short.
//
// NOTE: the caller asks wants_update() before reading the loss: reading it copies it to
// the host, which on a GPU waits for the step to finish; doing that only when a line is
// printed keeps the training loop free of synchronisations.
#pragma once

#include <chrono>
#include <cstdint>

namespace examples {

class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t num_batches);

  // Whether a line is due after `batches_done` batches (the last one always is).
  bool wants_update(int64_t batches_done) const;
  void update(int64_t batches_done, int64_t samples_done, double average_loss);
  // Clears the terminal line so that the epoch's summary takes its place.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;

  int64_t epoch_;
  int64_t epochs_;
  int64_t num_batches_;
  bool interactive_;
  int64_t batches_per_line_;  // when not interactive
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_update_;
};

}  // namespace examples
