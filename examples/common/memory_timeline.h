// examples/common/memory_timeline.h — the examples' memory recording: a memory::Recorder
// over the first steps of a run, written when they are done as any of
//   --memory-timeline FILE.html    the page (memory/timeline_html.h)
//   --memory-snapshot FILE.pickle  PyTorch's memory snapshot (memory/pytorch_snapshot.h)
//   --memory-trace FILE.json       Chrome Trace Event JSON for Perfetto (memory/chrome_trace.h)
// (one recording, however many of them are asked for), and the allocator's counters after
// every step of the whole run:
//   --memory-log FILE.csv          step, allocated, reserved, segments, requested bytes and
//                                  each category's, one line per optimizer step (a soak run's
//                                  record: does anything grow?)
//
// Training records its first kRecordedSteps optimizer steps: enough to see the first
// step (which creates optimizer state) and the steady ones after it, and few enough that
// the run's speed is unaffected afterwards. --bench records every step it runs, so that
// its timings include the recorder's cost. When the files are written, the leak check of
// step kLeakCheckedStep is printed (memory::Recorder::leaked_tensors): a steady step
// should leave nothing behind.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/memory/recorder.h>

#include "examples/common/cli.h"

namespace examples {

// The files a recording is written to; an empty path: not that one.
struct MemoryRecordingFiles {
  std::string timeline_html;    // --memory-timeline
  std::string snapshot_pickle;  // --memory-snapshot
  std::string trace_json;       // --memory-trace
  std::string log_csv;          // --memory-log (no recording: counters only)

  // Whether a Recorder runs (one of the first three files is asked for).
  bool any() const { return !timeline_html.empty() || !snapshot_pickle.empty() || !trace_json.empty(); }
  // The four flags with their paths, for check_output_paths (output_path.h).
  std::vector<std::pair<std::string, std::string>> outputs() const;
  // Adds the four flags to a program's command line.
  void add_to(FlagHandlers& flags);
};

// `flags` and the four memory flags, for a mode's list of flags it ignores.
std::vector<std::string> with_memory_recording_flags(std::vector<std::string> flags);
// Their lines in a program's --help; `steps` says which steps are recorded.
std::string memory_recording_usage(const std::string& steps);

class MemoryTimeline {
 public:
  static constexpr int64_t kRecordedSteps = 3;
  static constexpr int64_t kLeakCheckedStep = 1;

  // No files: records nothing. steps == 0: record until finish(). (The programs check
  // with their command line that the files can be written: output_path.h.) The log, when
  // asked for, is opened here and written as the run goes.
  MemoryTimeline(MemoryRecordingFiles files, mg::Device device, int64_t steps = kRecordedSteps);

  bool enabled() const { return recorder_ != nullptr; }
  void start();
  // After each optimizer step: appends the log's line; marks the recording's step boundary,
  // and after the last step to record, stops and writes the files.
  void step_done();
  // Stops and writes the files unless that happened already (a run shorter than the steps).
  void finish();

 private:
  void log_step();

  MemoryRecordingFiles files_;
  mg::Device device_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> log_{nullptr, &std::fclose};
  int64_t logged_steps_ = 0;
  int64_t steps_ = 0;
  int64_t steps_done_ = 0;
  bool written_ = false;
  std::unique_ptr<mg::memory::Recorder> recorder_;
};

}  // namespace examples
