// examples/common/memory_timeline.cpp — the recording flags; start, count steps, write;
// the per-step log.
#include "examples/common/memory_timeline.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include <memgrad/core/error.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/memory/snapshot.h>

namespace examples {

std::vector<std::pair<std::string, std::string>> MemoryRecordingFiles::outputs() const {
  return {{"--memory-timeline", timeline_html},
          {"--memory-snapshot", snapshot_pickle},
          {"--memory-trace", trace_json},
          {"--memory-log", log_csv}};
}

void MemoryRecordingFiles::add_to(FlagHandlers& flags) {
  flags["--memory-timeline"] = [this](const std::string& value) {
    timeline_html = parse_file_name("--memory-timeline", value);
  };
  flags["--memory-snapshot"] = [this](const std::string& value) {
    snapshot_pickle = parse_file_name("--memory-snapshot", value);
  };
  flags["--memory-trace"] = [this](const std::string& value) { trace_json = parse_file_name("--memory-trace", value); };
  flags["--memory-log"] = [this](const std::string& value) { log_csv = parse_file_name("--memory-log", value); };
}

std::vector<std::string> with_memory_recording_flags(std::vector<std::string> flags) {
  for (const char* flag : {"--memory-timeline", "--memory-snapshot", "--memory-trace", "--memory-log"}) {
    flags.push_back(flag);
  }
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
         "                           chrome://tracing): bytes by category, phases and ops\n"
         "  --memory-log FILE        after every optimizer step of the whole run, a CSV line of\n"
         "                           the allocator's allocated, reserved and requested bytes,\n"
         "                           its segments, and each category's bytes\n";
}

MemoryTimeline::MemoryTimeline(MemoryRecordingFiles files, mg::Device device, int64_t steps)
    : files_(std::move(files)), device_(device), steps_(steps) {
  if (!files_.log_csv.empty()) {
    log_.reset(std::fopen(files_.log_csv.c_str(), "w"));
    MG_CHECK(log_ != nullptr, "cannot write the memory log ", files_.log_csv, ": ", std::strerror(errno),
             ". Hint: --memory-log names a file in a directory that exists and can be written.");
    std::fprintf(log_.get(), "step,allocated_bytes,reserved_bytes,segments,requested_bytes");
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
      std::fprintf(log_.get(), ",%s", mg::category_name(static_cast<mg::MemoryCategory>(c)));
    }
    std::fprintf(log_.get(), "\n");
  }
  if (!files_.any()) return;
  recorder_ = std::make_unique<mg::memory::Recorder>(mg::memory::RecorderOptions{.device = device});
}

void MemoryTimeline::start() {
  if (recorder_) recorder_->start();
}

void MemoryTimeline::log_step() {
  const mg::memory::Snapshot now = mg::memory::snapshot(device_);
  std::fprintf(log_.get(), "%lld,%lld,%lld,%lld,%lld", static_cast<long long>(++logged_steps_),
               static_cast<long long>(now.allocated_bytes), static_cast<long long>(now.reserved_bytes),
               static_cast<long long>(now.num_segments), static_cast<long long>(now.requested_bytes));
  for (const mg::memory::CategoryBytes& category : now.by_category) {
    std::fprintf(log_.get(), ",%lld", static_cast<long long>(category.current));
  }
  std::fprintf(log_.get(), "\n");
  // NOTE: flushed every step, so that a run that dies leaves its record up to that step.
  std::fflush(log_.get());
}

void MemoryTimeline::step_done() {
  if (log_) log_step();
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
