// core/graph_capture.h — whether the calling thread is capturing a CUDA graph
// (cuda/captured_step.h), the refusal of what a captured step cannot contain, and which
// captured graphs are still alive. In core, and in every build, because rooms above cuda/
// ask too (an optimizer refuses a learning rate its live graph would not see) and a build
// without CUDA must link them.
//
// A captured step replays on the device alone: anything that waits for the device, reads a
// device value on the host or copies through pageable host memory would either break the
// capture (CUDA then fails it with a terse "operation not permitted when stream is
// capturing") or bake in a value that every replay repeats. Each such place in memgrad
// asks refuse_during_graph_capture first, so the user gets an mg::Error naming the
// operation instead, while the capture can still be abandoned cleanly.
#pragma once

#include <cstdint>
#include <string_view>

namespace mg {

// Whether the calling thread is inside a CapturedStep's capture.
bool graph_capture_underway();

// The id of the calling thread's capture underway, 0 when none.
uint64_t current_graph_capture();

// Throws mg::Error naming `operation` when a capture is underway on this thread; `hint`
// says what to do instead. Costs one thread-local read otherwise.
void refuse_during_graph_capture(std::string_view operation, std::string_view hint);

// Whether the graph captured as `id` may still replay (it has not been retired).
bool graph_capture_live(uint64_t id);
// The graph captured as `id` is gone: it will never replay again.
void retire_graph_capture(uint64_t id);

// Marks the calling thread as capturing for its lifetime, under a new id that stays live
// until retire_graph_capture (CapturedStep's capture only).
class GraphCaptureScope {
 public:
  GraphCaptureScope();
  ~GraphCaptureScope();
  GraphCaptureScope(const GraphCaptureScope&) = delete;
  GraphCaptureScope& operator=(const GraphCaptureScope&) = delete;
  uint64_t id() const { return id_; }

 private:
  uint64_t id_;
};

}  // namespace mg
