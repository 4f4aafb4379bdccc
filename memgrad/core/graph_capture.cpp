// core/graph_capture.cpp — the calling thread's capture and warm-up flags, the refusal message.
#include "memgrad/core/graph_capture.h"

#include <string>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"

namespace mg {

namespace {
thread_local GraphCaptureScope* capture = nullptr;  // the thread's capture, if any
thread_local bool warming_up = false;
}  // namespace

bool graph_capture_underway() { return capture != nullptr; }

bool graph_warmup_underway() { return warming_up; }

void refuse_during_graph_capture(std::string_view operation, std::string_view hint) {
  if (capture == nullptr) return;
  throw Error(std::string(operation) +
              " during CUDA graph capture: a captured step replays on the device alone, without "
              "the host, so it cannot wait for the device, read device values on the host or "
              "draw on host state. Hint: " + std::string(hint));
}

GraphCaptureScope::GraphCaptureScope() {
  MG_CHECK(capture == nullptr, "a CUDA graph capture is already underway on this thread. Hint: capture one "
           "step at a time; a CapturedStep cannot be made inside another's step.");
  capture = this;
}

GraphCaptureScope::~GraphCaptureScope() {
  capture = nullptr;
  for (const Draws& drawn : draws_) drawn.generator->set_state({drawn.generator->state().seed, drawn.first_offset});
}

std::vector<CapturedDraws> GraphCaptureScope::draws() const {
  std::vector<CapturedDraws> result;
  for (const Draws& drawn : draws_) {
    result.push_back({drawn.generator, drawn.base_on_device, drawn.generator->state().offset - drawn.first_offset});
  }
  return result;
}

PhiloxState captured_draw(Generator& generator, PhiloxState start, Device consumer) {
  MG_ASSERT(capture != nullptr, "captured_draw outside a capture");
  MG_ASSERT(consumer.is_cuda(), "captured_draw for ", consumer, ": Generator::reserve refuses it first");
  GraphCaptureScope::Draws* drawn = nullptr;
  for (GraphCaptureScope::Draws& candidate : capture->draws_) {
    if (candidate.generator == &generator) drawn = &candidate;
  }
  if (drawn == nullptr) {
    // Allocated inside the capture, so from the graph's private pool: it lives as long
    // as the graph, which keeps it in its CapturedDraws.
    capture->draws_.push_back({&generator, start.offset, empty({2}, {.dtype = DType::Int64, .device = consumer})});
    drawn = &capture->draws_.back();
  }
  MG_CHECK(start.offset >= drawn->first_offset, "a generator was set back, during CUDA graph capture, to before "
           "the capture's first draw from it (offset ", start.offset, " < ", drawn->first_offset,
           "). Hint: restore generator states only to states taken inside the captured step.");
  MG_CHECK(drawn->base_on_device.device() == consumer, "one generator drew for kernels on ",
           drawn->base_on_device.device(), " and on ", consumer, " in one CUDA graph capture. Hint: give each "
           "device's random ops their own Generator.");
  return {start.seed, start.offset - drawn->first_offset,
          static_cast<const uint64_t*>(drawn->base_on_device.raw_data())};
}

GraphWarmupScope::GraphWarmupScope() {
  MG_CHECK(!warming_up && capture == nullptr, "a CUDA graph warm-up or capture is already underway on this thread. "
           "Hint: a CapturedStep cannot be made inside another's step.");
  warming_up = true;
}

GraphWarmupScope::~GraphWarmupScope() { warming_up = false; }

}  // namespace mg
