// core/graph_capture.h — whether the calling thread is warming up or capturing a CUDA
// graph (cuda/captured_step.h), and the refusal of what a captured step cannot contain. In
// core, and in every build, because rooms above cuda/ ask too (an optimizer keeps its
// learning rate on the device for a step that will be captured) and a build without CUDA
// must link them.
//
// A captured step replays on the device alone: anything that waits for the device, reads a
// device value on the host or copies through pageable host memory would either break the
// capture (CUDA then fails it with a terse "operation not permitted when stream is
// capturing") or bake in a value that every replay repeats. Each such place in memgrad
// asks refuse_during_graph_capture first, so the user gets an mg::Error naming the
// operation instead, while the capture can still be abandoned cleanly.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "memgrad/core/kernels.h"
#include "memgrad/core/tensor.h"

namespace mg {

class Generator;

// A generator the warm-up drew from for CUDA kernels, and the two uint64 device words
// ({seed, base offset}) its captured draws will read (PhiloxState::captured_base). Made
// during the warm-up, outside the graph's pool: words written between replays must not
// share memory with blocks the captured step itself frees and reuses.
struct RandomBase {
  Generator* generator;
  Tensor base_on_device;
};

// One generator's random draws in a capture. The captured kernels add their offset,
// relative to the capture's first draw from the generator, to the base in
// `base_on_device`. Before each replay, CapturedStep reserves `blocks` from the generator
// and writes {seed, offset} there, so replays draw what eager steps would, and a
// manual_seed between replays reaches them.
struct CapturedDraws {
  Generator* generator;
  Tensor base_on_device;
  uint64_t blocks;
};

// Whether the calling thread is inside a CapturedStep's capture.
bool graph_capture_underway();
// Whether the calling thread runs a CapturedStep's warm-up: the eager steps before the
// capture, where what the captured step will need is made (e.g. an optimizer's learning
// rate on the device, optim/optimizer.h).
bool graph_warmup_underway();

// Throws mg::Error naming `operation` when a capture is underway on this thread; `hint`
// says what to do instead. Costs one thread-local read otherwise.
void refuse_during_graph_capture(std::string_view operation, std::string_view hint);

// Marks the calling thread as warming up (GraphWarmupScope) or capturing
// (GraphCaptureScope) for the scope's lifetime: CapturedStep's own markers.
//
// A warm-up also notes every generator drawn from for a CUDA kernel and makes its
// RandomBase (warmup_draw). A capture takes those: its draws from them become relative
// (captured_draw), and a draw from any other generator is an mg::Error. A capture's
// draws never happen on the host: when the scope ends, each generator drawn from is set
// back to where the capture found it (so the first replay draws what the next eager step
// would have).
class GraphWarmupScope {
 public:
  GraphWarmupScope();
  ~GraphWarmupScope();
  GraphWarmupScope(const GraphWarmupScope&) = delete;
  GraphWarmupScope& operator=(const GraphWarmupScope&) = delete;

  // The generators drawn from so far, each once.
  std::vector<RandomBase> random_bases() const { return bases_; }

 private:
  friend void warmup_draw(Generator& generator, Device consumer);
  std::vector<RandomBase> bases_;
};

class GraphCaptureScope {
 public:
  explicit GraphCaptureScope(std::vector<RandomBase> bases = {});
  ~GraphCaptureScope();
  GraphCaptureScope(const GraphCaptureScope&) = delete;
  GraphCaptureScope& operator=(const GraphCaptureScope&) = delete;

  // The draws the capture made so far, one entry per generator drawn from.
  std::vector<CapturedDraws> draws() const;

 private:
  struct Draws {
    RandomBase base;
    std::optional<uint64_t> first_offset;  // the generator's offset at its first draw in the capture
  };
  friend PhiloxState captured_draw(Generator& generator, PhiloxState start, Device consumer);
  std::vector<Draws> draws_;
};

// Generator::reserve's side of a warm-up (for a CUDA consumer) and of a capture: `start`
// is what the generator reserved on the host for a CUDA kernel; captured_draw returns it
// as that kernel, on `consumer`, must see it (see CapturedDraws).
void warmup_draw(Generator& generator, Device consumer);
PhiloxState captured_draw(Generator& generator, PhiloxState start, Device consumer);

}  // namespace mg
