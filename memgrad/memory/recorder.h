// memory/recorder.h — mg::memory::Recorder: every allocation, free and re-tag the
// caching allocator performs, with the op, module path, phase and step that caused it,
// and the allocator's allocated and reserved bytes right after.
//
//   mg::memory::Recorder recorder({.device = mg::Device::cpu()});
//   recorder.start();
//   for (...) { train_step(); recorder.next_step(); }
//   recorder.stop();
//   recorder.write_html("timeline.html");   // stacked area of bytes by category over time
//
// Events go to a fixed-capacity ring buffer allocated by the constructor; when it is full
// the oldest events are dropped (and counted), their bytes folded into the per-device
// baseline so the chart of what is left stays exact. Beside it, a table of the blocks
// allocated while recording and still alive (with the shape each was made for) answers
// "who holds my memory" (live_tensors) and finds tensors a step left behind
// (leaked_tensors); it grows with the live blocks, not with the events.
//
// Categories: a SavedTensor re-tags a live block (say TEMPORARY -> ACTIVATION) without
// allocating. That is a Retag event: `bytes` move from `previous_category` to `category`;
// allocated and reserved do not change.
//
// Segments: the allocator's SegmentAllocate and SegmentFree events (a segment taken from
// the backend, one returned by empty_cache() and the like) are recorded too, with
// addresses, so the recording also knows which segments exist and which blocks live in
// them: told by each allocator, at its first event, what it held before (see
// core/allocator/allocator_observer.h), the Recorder keeps that picture up to date.
// timeline().segments is it at the end of the recording (the exporters of
// pytorch_snapshot.h draw blocks that predate the recording from it).
//
// Op names: a backward event carries its node's name ("ConvolutionBackward", set by the
// engine) and the module path of the forward op that recorded the node. A forward op
// allocates its output before it records its node, so a forward event is labelled when
// the node is recorded: every unlabelled event of that thread since
// the last op, module or phase boundary takes the node's name without "Backward"
// ("Convolution"). Allocations of ops that record no node (no grad needed) keep an empty op
// unless a recorded op follows in the same module. A free or re-tag that happens outside
// any op or module takes the op and module of the block's allocation (the gradients that
// zero_grad frees carry the backward op and module that made them).
//
// One Recorder runs at a time; events are recorded from every thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memgrad/core/allocator/allocator_observer.h"
#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/memory_category.h"
#include "memgrad/memory/context.h"
#include "memgrad/core/shape.h"

namespace mg::memory {

// The allocator's events (core/allocator/allocator_observer.h), which the Recorder listens to.
using EventKind = AllocatorEventKind;
// "allocate", "free", "retag", "segment_allocate", "segment_free".
const char* event_kind_name(EventKind kind);

struct MemoryEvent {
  int64_t time_ns = 0;  // since start()
  Device device;
  EventKind kind = EventKind::Allocate;
  // Requested bytes (before the allocator's rounding): positive for Allocate and Retag,
  // negative for Free; a segment's bytes for SegmentAllocate, minus them for SegmentFree.
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::Temporary;
  MemoryCategory previous_category = MemoryCategory::Temporary;  // Retag only
  std::string op;           // "" when unknown
  std::string module_path;  // "layer1.0.conv1"; "" outside any module
  Phase phase = Phase::Other;
  int64_t step = 0;
  int64_t allocated_bytes = 0;  // the device's, right after the event
  int64_t reserved_bytes = 0;
  uintptr_t address = 0;    // the block's or the segment's
  int64_t block_bytes = 0;  // the bytes the block spans (rounded up); a segment's bytes
  StreamId stream = 0;
};

// A live block inside a segment, at the end of the recording.
struct RecordedBlock {
  uintptr_t address = 0;
  int64_t block_bytes = 0;  // rounded
  int64_t requested_bytes = 0;
  MemoryCategory category = MemoryCategory::Temporary;
  std::string op;           // "" when unknown (always for blocks from before the recording)
  std::string module_path;
  int64_t step = 0;
  bool before_recording = false;  // allocated before start(): who allocated it is unknown
};

// A segment the allocator held at the end of the recording; bytes between its live blocks
// are free.
struct RecordedSegment {
  Device device;
  uintptr_t address = 0;
  int64_t bytes = 0;
  StreamId stream = 0;
  bool small_pool = false;
  std::vector<RecordedBlock> live_blocks;  // address order
};

// A device's requested bytes per category just before its oldest kept event.
struct DeviceBaseline {
  Device device;
  std::array<int64_t, kNumMemoryCategories> category_bytes{};
};

// Everything the exporters draw: a consistent copy taken under the recorder's lock.
struct RecordedTimeline {
  std::vector<MemoryEvent> events;       // oldest first
  std::vector<DeviceBaseline> baselines;  // one per device with events
  std::vector<int64_t> step_start_ns;     // step k starts at step_start_ns[k]; [0] = 0
  int64_t dropped_events = 0;
  size_t capacity = 0;
  // The segments at the end of the recording (now, while it runs), by device and address.
  std::vector<RecordedSegment> segments;
};

// A block allocated while recording and alive now: what holds memory, and who made it.
struct LiveTensor {
  Device device;
  int64_t bytes = 0;  // requested
  MemoryCategory category = MemoryCategory::Temporary;  // its category now
  std::string op;           // the op that allocated it ("" when unknown)
  std::string module_path;  // where ("" outside any module)
  Phase phase = Phase::Other;
  int64_t step = 0;  // the step it was allocated in
  // The tensor it was allocated for; `described` is false for blocks that did not come
  // from a tensor factory (library scratch).
  bool described = false;
  Shape sizes;
  DType dtype = DType::Float32;
  // Input built ahead of the step that will use it and not yet taken (mark_input_prepared_ahead).
  bool prepared_ahead = false;
};

struct RecorderOptions {
  size_t capacity = size_t{1} << 18;  // events kept (88 bytes each: 22 MiB by default)
  std::optional<Device> device = std::nullopt;  // record this device only; nullopt: every device
};

class Recorder {
 public:
  explicit Recorder(RecorderOptions options = {});
  // Stops if running.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Begins a new recording (earlier events are discarded) at step 0. Throws mg::Error if
  // another Recorder is running; starting a running recorder changes nothing.
  void start();
  void stop();
  bool running() const;

  // Ends the current step: later events carry the next step index and the chart marks
  // the boundary.
  void next_step();
  int64_t step() const;

  RecordedTimeline timeline() const;
  int64_t dropped_events() const;

  // Each writes a temporary file next to `path` and renames it over `path`, so a failed
  // write never leaves half a file. JSON holds integers and strings only (io/json_parse
  // reads it); HTML is one self-contained page (no network resources); the PyTorch
  // snapshot is a pickle for torch.cuda._memory_viz and pytorch.org/memory_viz
  // (pytorch_snapshot.h); the Chrome trace is JSON for Perfetto (chrome_trace.h).
  void write_json(const std::string& path) const;
  void write_html(const std::string& path) const;
  void write_pytorch_snapshot(const std::string& path) const;
  void write_chrome_trace(const std::string& path) const;

  // Who holds memory: the blocks allocated since start() and not freed, oldest first
  // (memory allocated before start(), such as the model's parameters, is not listed: start
  // the recorder first to see it). Works while running and after stop().
  std::vector<LiveTensor> live_tensors() const;
  // The leak check: tensors allocated during step `step` (which must have ended) that are
  // still alive, except the kinds a training step keeps on purpose (PARAMETER, GRADIENT,
  // OPTIMIZER_STATE) and input prepared ahead that no step has taken yet (a DataLoader's
  // prefetched batches). A loss kept in a list, with the graph it holds, shows here.
  std::vector<LiveTensor> leaked_tensors(int64_t step) const;

  struct State;  // the ring buffer and counters; defined in recorder.cpp

 private:
  std::unique_ptr<State> state_;
};

// Input built ahead of the step that will use it: a DataLoader's prefetched batches
// (data/dataloader.h), built by its thread while an earlier step runs.
// - While a PreparedInputScope lives, the blocks its thread allocates count, for the
//   running Recorder, as no step's leftovers (leaked_tensors passes them over): they wait
//   for their step.
// - mark_input_taken(block): a step took the block (`block` is tensor.storage()->data());
//   from now on it counts as allocated by the step running now, so a batch the loop keeps
//   past its step is that step's leak. It does nothing when no Recorder runs or the block
//   was allocated before it started.
class PreparedInputScope {
 public:
  PreparedInputScope();
  ~PreparedInputScope();
  PreparedInputScope(const PreparedInputScope&) = delete;
  PreparedInputScope& operator=(const PreparedInputScope&) = delete;

 private:
  bool previous_;
};
void mark_input_taken(const void* block);

// The timeline as one JSON object (the text write_json writes).
std::string timeline_json(const RecordedTimeline& timeline);

// `tensors` grouped by category, module path and op, largest groups first: count, bytes
// and the most common shapes; `title` heads the table.
std::string live_tensor_report(const std::vector<LiveTensor>& tensors, const std::string& title);

namespace detail {

// Called when autograd records `node` named `node_name` (see "Op names" above); also
// remembers the module path of the recording, for the node's backward (module_of_node).
void label_forward_op(const void* node, const char* node_name);
// The module path id under which `node` was recorded in this recording (0: unknown).
uint32_t module_of_node(const void* node);
// Starts a new forward-op window for the calling thread (module and phase boundaries).
void close_forward_op_window();
// The running Recorder's step (its next_step() count); nullopt when none runs.
std::optional<int64_t> recording_step();

}  // namespace detail

}  // namespace mg::memory
