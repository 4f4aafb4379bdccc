// core/graph_capture.cpp — the calling thread's capture and warm-up flags, the refusal message.
#include "memgrad/core/graph_capture.h"

#include <string>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"

namespace mg {

namespace {
thread_local GraphCaptureScope* capture = nullptr;  // the thread's capture, if any
thread_local GraphWarmupScope* warmup = nullptr;    // the thread's warm-up, if any

// A generator's captured draws read one pair of device words, so they serve one device.
void check_one_device(const RandomBase& base, Device consumer) {
  MG_CHECK(base.base_on_device.device() == consumer, "one generator drew for kernels on ", base.base_on_device.device(),
           " and on ", consumer, " in one CUDA graph's step. Hint: give each device's random ops their own Generator.");
}
}  // namespace

bool graph_capture_underway() { return capture != nullptr; }

bool graph_warmup_underway() { return warmup != nullptr; }

void refuse_during_graph_capture(std::string_view operation, std::string_view hint) {
  if (capture == nullptr) return;
  throw Error(std::string(operation) +
              " during CUDA graph capture: a captured step replays on the device alone, without "
              "the host, so it cannot wait for the device, read device values on the host or "
              "draw on host state. Hint: " + std::string(hint));
}

GraphWarmupScope::GraphWarmupScope() {
  MG_CHECK(warmup == nullptr && capture == nullptr, "a CUDA graph warm-up or capture is already underway on this "
           "thread. Hint: a CapturedStep cannot be made inside another's step.");
  warmup = this;
}

GraphWarmupScope::~GraphWarmupScope() { warmup = nullptr; }

void warmup_draw(Generator& generator, Device consumer) {
  MG_ASSERT(warmup != nullptr && consumer.is_cuda(), "warmup_draw outside a warm-up or for ", consumer);
  for (const RandomBase& known : warmup->bases_) {
    if (known.generator != &generator) continue;
    check_one_device(known, consumer);
    return;
  }
  warmup->bases_.push_back({&generator, empty({2}, {.dtype = DType::Int64, .device = consumer})});
}

GraphCaptureScope::GraphCaptureScope(std::vector<RandomBase> bases) {
  MG_CHECK(capture == nullptr && warmup == nullptr, "a CUDA graph capture or warm-up is already underway on this "
           "thread. Hint: capture one step at a time; a CapturedStep cannot be made inside another's step.");
  for (RandomBase& base : bases) draws_.push_back({std::move(base), std::nullopt});
  capture = this;
}

GraphCaptureScope::~GraphCaptureScope() {
  capture = nullptr;
  for (const Draws& drawn : draws_) {
    if (!drawn.first_offset) continue;
    Generator& generator = *drawn.base.generator;
    generator.set_state({generator.state().seed, *drawn.first_offset});
  }
}

std::vector<CapturedDraws> GraphCaptureScope::draws() const {
  std::vector<CapturedDraws> result;
  for (const Draws& drawn : draws_) {
    if (!drawn.first_offset) continue;
    result.push_back({drawn.base.generator, drawn.base.base_on_device,
                      drawn.base.generator->state().offset - *drawn.first_offset});
  }
  return result;
}

PhiloxState captured_draw(Generator& generator, PhiloxState start, Device consumer) {
  MG_ASSERT(capture != nullptr && consumer.is_cuda(), "captured_draw outside a capture or for ", consumer);
  GraphCaptureScope::Draws* drawn = nullptr;
  for (GraphCaptureScope::Draws& candidate : capture->draws_) {
    if (candidate.base.generator == &generator) drawn = &candidate;
  }
  MG_CHECK(drawn != nullptr, "a random draw for ", consumer, " during CUDA graph capture, from a generator the "
           "warm-up never drew from. Hint: the captured step must draw from the same generators as its warm-up "
           "steps (the warm-up makes the device words each replay's seed and offset go to).");
  check_one_device(drawn->base, consumer);
  if (!drawn->first_offset) drawn->first_offset = start.offset;
  MG_CHECK(start.offset >= *drawn->first_offset, "a generator was set back, during CUDA graph capture, to before "
           "the capture's first draw from it (offset ", start.offset, " < ", *drawn->first_offset,
           "). Hint: restore generator states only to states taken inside the captured step.");
  return {start.seed, start.offset - *drawn->first_offset,
          static_cast<const uint64_t*>(drawn->base.base_on_device.raw_data())};
}

}  // namespace mg
