// examples/common/memory_timeline.cpp — the recording flags; start, count steps, write.
#include "examples/common/memory_timeline.h"

#include <cstdio>
#include <string>
#include <utility>

namespace examples {

std::vector<std::pair<std::string, std::string>> MemoryRecordingFiles::outputs() const {
  return {{"--memory-timeline", timeline_html}, {"--memory-snapshot", snapshot_pickle}, {"--memory-trace", trace_json}};
}

void MemoryRecordingFiles::add_to(FlagHandlers& flags) {
  flags["--memory-timeline"] = [this](const std::string& value) {
    timeline_html = parse_file_name("--memory-timeline", value);
  };
  flags["--memory-snapshot"] = [this](const std::string& value) {
    snapshot_pickle = parse_file_name("--memory-snapshot", value);
  };
  flags["--memory-trace"] = [this](const std::string& value) { trace_json = parse_file_name("--memory-trace", value); };
}

std::vector<std::string> with_memory_recording_flags(std::vector<std::string> flags) {
  for (const char* flag : {"--memory-timeline", "--memory-snapshot", "--memory-trace"}) flags.push_back(flag);
  return flags;
}

std::string memory_recording_usage(const std::string& steps) {
  return "  --memory-timeline FILE   record every allocation and free of " + steps +
         "\n"
         "                           and write FILE, an HTML page of bytes by category (zoom,\n"
         "                           the largest allocations, the allocator's segments)\n"
         "  --memory-snapshot FILE   the same recording as PyTorch's memory snapshot (a pickle\n"
         "                           for pytorch.org/memory_viz and torch.cuda._memory_viz)\n"
         "  --memory-trace FILE      the same recording as Chrome Trace Event JSON (Perfetto,\n"
         "                           chrome://tracing): bytes by category, phases and ops\n";
}

MemoryTimeline::MemoryTimeline(MemoryRecordingFiles files, mg::Device device, int64_t steps)
    : files_(std::move(files)), steps_(steps) {
  if (!files_.any()) return;
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
  written_ = true;
  const mg::memory::RecordedTimeline timeline = recorder_->timeline();
  auto written = [&](const char* what, const std::string& path) {
    std::fprintf(stderr, "memory %s of %lld steps (%zu events) written to %s\n", what,
                 static_cast<long long>(steps_done_), timeline.events.size(), path.c_str());
  };
  if (!files_.timeline_html.empty()) {
    recorder_->write_html(files_.timeline_html);
    written("timeline", files_.timeline_html);
  }
  if (!files_.snapshot_pickle.empty()) {
    recorder_->write_pytorch_snapshot(files_.snapshot_pickle);
    written("snapshot", files_.snapshot_pickle);
  }
  if (!files_.trace_json.empty()) {
    recorder_->write_chrome_trace(files_.trace_json);
    written("trace", files_.trace_json);
  }
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
