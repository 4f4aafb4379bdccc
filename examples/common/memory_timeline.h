// examples/common/memory_timeline.h — the examples' --memory-timeline FILE.html: a
// memory::Recorder over the first steps of a run, written as an HTML chart when they are
// done (memory/timeline_html.h draws it).
//
// Training records its first kRecordedSteps optimizer steps: enough to see the first
// step (which creates optimizer state) and the steady ones after it, and few enough that
// the run's speed is unaffected afterwards. --bench records every step it runs, so that
// its timings include the recorder's cost. When the page is written, the leak check of
// step kLeakCheckedStep is printed (memory::Recorder::leaked_tensors): a steady step
// should leave nothing behind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <memgrad/core/device.h>
#include <memgrad/memory/recorder.h>

namespace examples {

class MemoryTimeline {
 public:
  static constexpr int64_t kRecordedSteps = 3;
  static constexpr int64_t kLeakCheckedStep = 1;

  // An empty path records nothing. steps == 0: record until finish(). (The programs check
  // with their command line that `path` can be written: output_path.h.)
  MemoryTimeline(std::string path, mg::Device device, int64_t steps = kRecordedSteps);

  bool enabled() const { return recorder_ != nullptr; }
  void start();
  // After each optimizer step: marks the step boundary; after the last step to record,
  // stops and writes the page.
  void step_done();
  // Stops and writes the page unless that happened already (a run shorter than the steps).
  void finish();

 private:
  std::string path_;
  int64_t steps_ = 0;
  int64_t steps_done_ = 0;
  bool written_ = false;
  std::unique_ptr<mg::memory::Recorder> recorder_;
};

}  // namespace examples
