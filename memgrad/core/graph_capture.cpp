// core/graph_capture.cpp — the calling thread's capture and warm-up flags, the refusal message.
#include "memgrad/core/graph_capture.h"

#include <string>

#include "memgrad/core/error.h"

namespace mg {

namespace {
thread_local bool capturing = false;
thread_local bool warming_up = false;
}  // namespace

bool graph_capture_underway() { return capturing; }

bool graph_warmup_underway() { return warming_up; }

void refuse_during_graph_capture(std::string_view operation, std::string_view hint) {
  if (!capturing) return;
  throw Error(std::string(operation) +
              " during CUDA graph capture: a captured step replays on the device alone, without "
              "the host, so it cannot wait for the device, read device values on the host or "
              "draw on host state. Hint: " + std::string(hint));
}

GraphCaptureScope::GraphCaptureScope() {
  MG_CHECK(!capturing, "a CUDA graph capture is already underway on this thread. Hint: capture one "
           "step at a time; a CapturedStep cannot be made inside another's step.");
  capturing = true;
}

GraphCaptureScope::~GraphCaptureScope() { capturing = false; }

GraphWarmupScope::GraphWarmupScope() {
  MG_CHECK(!warming_up && !capturing, "a CUDA graph warm-up or capture is already underway on this thread. "
           "Hint: a CapturedStep cannot be made inside another's step.");
  warming_up = true;
}

GraphWarmupScope::~GraphWarmupScope() { warming_up = false; }

}  // namespace mg
