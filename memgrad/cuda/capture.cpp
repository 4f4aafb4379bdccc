// cuda/capture.cpp — the calling thread's capture flag and the refusal message.
#include "memgrad/cuda/capture.h"

#include <string>

#include "memgrad/core/error.h"

namespace mg::cuda {

namespace {
thread_local bool capturing = false;
}  // namespace

bool capture_underway() { return capturing; }

void refuse_during_capture(std::string_view operation, std::string_view hint) {
  if (!capturing) return;
  throw Error(std::string(operation) +
              " during CUDA graph capture: a captured step replays on the device alone, without "
              "the host, so it cannot wait for the device, read device values on the host or "
              "draw on host state. Hint: " + std::string(hint));
}

CaptureScope::CaptureScope() {
  MG_CHECK(!capturing, "a CUDA graph capture is already underway on this thread. Hint: capture one "
           "step at a time; a CapturedStep cannot be made inside another's step.");
  capturing = true;
}

CaptureScope::~CaptureScope() { capturing = false; }

}  // namespace mg::cuda
