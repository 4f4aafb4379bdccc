// examples/common/memory_timeline.cpp — --memory-timeline: start, count steps, write.
#include "examples/common/memory_timeline.h"

#include <cstdio>
#include <string>
#include <utility>


namespace examples {

MemoryTimeline::MemoryTimeline(std::string path, mg::Device device, int64_t steps)
    : path_(std::move(path)), steps_(steps) {
  if (path_.empty()) return;
  recorder_ = std::make_unique<mg::memory::Recorder>(mg::memory::RecorderOptions{.device = device});
}

void MemoryTimeline::start() {
  if (recorder_) recorder_->start();
}

void MemoryTimeline::step_done() {
  if (!recorder_ || written_) return;
  ++steps_done_;
  if (steps_ > 0 && steps_done_ == steps_) {
    finish();
    return;
  }
  recorder_->next_step();
}

void MemoryTimeline::finish() {
  if (!recorder_ || written_) return;
  recorder_->stop();
  recorder_->write_html(path_);
  written_ = true;
  const mg::memory::RecordedTimeline timeline = recorder_->timeline();
  std::fprintf(stderr, "memory timeline of %lld steps (%zu events) written to %s\n",
               static_cast<long long>(steps_done_), timeline.events.size(), path_.c_str());
  // The leak check on the first steady step (step 0 creates what a run keeps: optimizer
  // state, library workspaces): what it allocated and is still alive, but should not be.
  if (recorder_->step() > kLeakCheckedStep) {
    const std::string title = "tensors step " + std::to_string(kLeakCheckedStep) +
                              " created and left alive (other than parameters, gradients and optimizer state)";
    std::fprintf(stderr, "%s",
                 mg::memory::live_tensor_report(recorder_->leaked_tensors(kLeakCheckedStep), title).c_str());
  }
}

}  // namespace examples
