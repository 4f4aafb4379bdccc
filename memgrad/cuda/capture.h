// cuda/capture.h — whether the calling thread is capturing a CUDA graph (CapturedStep,
// cuda/captured_step.h), and the refusal of what a captured step cannot contain.
//
// A captured step replays without the host: anything that waits for the device, reads a
// device value on the host or copies through pageable host memory would either break the
// capture (CUDA then fails it with a terse "operation not permitted when stream is
// capturing") or bake in a value that every replay repeats. Each such place in memgrad
// asks refuse_during_capture first, so the user gets an mg::Error naming the operation
// instead, while the capture can still be abandoned cleanly.
#pragma once

#include <string_view>

namespace mg::cuda {

// Whether the calling thread is inside a CapturedStep's capture.
bool capture_underway();

// Throws mg::Error naming `operation` when a capture is underway on this thread; `hint`
// says what to do instead. Costs one thread-local read otherwise.
void refuse_during_capture(std::string_view operation, std::string_view hint);

// Marks the calling thread as capturing for its lifetime (CapturedStep's capture only).
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

}  // namespace mg::cuda
