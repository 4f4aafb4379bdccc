// memory/recorder.cpp — the ring buffer behind mg::memory::Recorder.
//
// NOTE: one process-wide mutex guards the running recorder. The allocator calls in with
// its own lock held (so allocated/reserved are those right after the event), hence the
// lock order is allocator -> recorder -> label table, and nothing here calls the allocator.
#include "memgrad/memory/recorder.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "memgrad/core/error.h"
#include "memgrad/memory/chrome_trace.h"
#include "memgrad/memory/pytorch_snapshot.h"
#include "memgrad/memory/timeline_html.h"

namespace mg::memory {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::Allocate: return "allocate";
    case EventKind::Free: return "free";
    case EventKind::Retag: return "retag";
    case EventKind::SegmentAllocate: return "segment_allocate";
    case EventKind::SegmentFree: return "segment_free";
  }
  return "allocate";
}

namespace {

using Clock = std::chrono::steady_clock;

// An event as stored: labels as ids, so that storing one allocates nothing.
struct StoredEvent {
  int64_t time_ns;
  int64_t bytes;
  int64_t allocated_bytes;
  int64_t reserved_bytes;
  uintptr_t address;
  int64_t block_bytes;
  StreamId stream;
  Device device;
  bool small_pool;  // segment events
  int32_t step;
  uint32_t op;
  uint32_t module;
  uint32_t thread;  // who caused it: forward-op labels apply to their own thread only
  EventKind kind;
  MemoryCategory category;
  MemoryCategory previous_category;
  Phase phase;
};

// A block allocated while recording and not yet freed: its allocation event's sequence
// number (its op label is read from the ring, where forward ops name events after the
// fact, while the event is still there), a copy of that event, and the tensor's shape.
struct LiveBlock {
  uint64_t sequence;
  StoredEvent allocation;
  bool before_recording = false;  // alive when the recording started (no sequence, no labels)
  bool described = false;
  Shape sizes;
  DType dtype = DType::Float32;
  bool prepared_ahead = false;  // allocated in a PreparedInputScope, until mark_input_taken
};

// What an event adds to each category's requested bytes.
void apply_to(std::array<int64_t, kNumMemoryCategories>& category_bytes, const StoredEvent& event, int sign) {
  if (is_segment_event(event.kind)) return;
  category_bytes[static_cast<int>(event.category)] += sign * event.bytes;
  if (event.kind == EventKind::Retag) category_bytes[static_cast<int>(event.previous_category)] -= sign * event.bytes;
}

uint32_t thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local const uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

// The calling thread's first event (a sequence number) that a forward op may still claim,
// in recording number `recording` (a window left over from an earlier recording is void).
struct ForwardOpWindow {
  uint64_t recording = 0;
  uint64_t start = 0;
};
ForwardOpWindow& forward_op_window() {
  thread_local ForwardOpWindow window;
  return window;
}
uint64_t recordings_started = 0;  // guarded by recorder_mutex()

std::mutex& recorder_mutex() {
  static std::mutex* const mutex = new std::mutex();  // never destroyed, like the label table
  return *mutex;
}

Recorder::State* running_state = nullptr;  // guarded by recorder_mutex()

// Inside a PreparedInputScope: this thread builds input ahead of the step that uses it.
thread_local bool preparing_input_ahead = false;

// The node name an op records, without "Backward": the forward op's name.
std::string_view forward_name(std::string_view node_name) {
  constexpr std::string_view suffix = "Backward";
  if (node_name.size() > suffix.size() && node_name.substr(node_name.size() - suffix.size()) == suffix) {
    node_name.remove_suffix(suffix.size());
  }
  return node_name;
}

void write_text_atomically(const std::string& path, const std::string& text, const char* what) {
  MG_CHECK(!path.empty(), "Recorder::", what, ": the path is empty. Hint: name a file, e.g. timeline.html.");
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary);
    MG_CHECK(file.is_open(), "Recorder::", what, ": cannot create '", temporary,
             "'. Hint: check that the folder exists and is writable.");
    file << text;
    file.flush();
    MG_CHECK(file.good(), "Recorder::", what, ": writing '", temporary, "' failed (disk full?).");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  MG_CHECK(!error, "Recorder::", what, ": cannot rename '", temporary, "' to '", path, "': ", error.message(), ".");
}

}  // namespace

struct Recorder::State {
  RecorderOptions options;
  std::vector<StoredEvent> ring;  // event with sequence number s sits at s % capacity
  uint64_t total = 0;             // events ever stored in this recording
  std::vector<DeviceBaseline> baselines;
  std::vector<int64_t> step_start_ns{0};
  int32_t step = 0;
  Clock::time_point start_time = Clock::now();
  bool running = false;
  uint64_t recording = 0;  // which recording of the process this is
  // The module path each autograd node was recorded under. NOTE: keyed by address; a freed
  // node's address is reused by a later one, which overwrites the entry, so the map stays
  // as small as the most nodes alive at once.
  std::unordered_map<const void*, uint32_t> node_modules;
  // Blocks alive, by address: those allocated in this recording (live_tensors()), and
  // those its allocators held when it started (before_recording).
  std::unordered_map<const void*, LiveBlock> live;
  // Each device's segments (address -> segment; its blocks are in `live`).
  struct Segment {
    int64_t bytes;
    StreamId stream;
    bool small_pool;
  };
  std::vector<std::pair<Device, std::map<uintptr_t, Segment>>> segments;

  std::map<uintptr_t, Segment>& segments_of(Device device) {
    for (auto& [known, table] : segments) {
      if (known == device) return table;
    }
    return segments.emplace_back(device, std::map<uintptr_t, Segment>{}).second;
  }

  // What an allocator held when it first reported to this recording.
  void add_existing(Device device, const std::vector<SegmentState>& existing) {
    for (const auto& [known, table] : segments) {
      if (known == device) return;  // told again after a second installation: the table is current
    }
    std::map<uintptr_t, Segment>& table = segments_of(device);
    for (const SegmentState& segment : existing) {
      table[segment.address] = Segment{segment.bytes, segment.stream, segment.small_pool};
      for (const LiveBlockState& block : segment.live_blocks) {
        LiveBlock& entry = live[reinterpret_cast<const void*>(block.address)];
        entry = LiveBlock{};
        entry.before_recording = true;
        entry.allocation = StoredEvent{.time_ns = 0, .bytes = block.requested_bytes, .allocated_bytes = 0,
                                       .reserved_bytes = 0, .address = block.address,
                                       .block_bytes = block.block_bytes, .stream = segment.stream, .device = device,
                                       .small_pool = segment.small_pool, .step = 0, .op = 0, .module = 0, .thread = 0, .kind = EventKind::Allocate,
                                       .category = block.category, .previous_category = block.category,
                                       .phase = Phase::Other};
      }
    }
  }

  uint64_t oldest() const { return total > ring.size() ? total - ring.size() : 0; }

  DeviceBaseline* baseline_of(Device device) {
    for (DeviceBaseline& baseline : baselines) {
      if (baseline.device == device) return &baseline;
    }
    return nullptr;
  }

  // Keeps the live-block table in step with an event about the block at `address`.
  void track(const void* address, const StoredEvent& event) {
    switch (event.kind) {
      case EventKind::Allocate: {
        LiveBlock& block = live[address];
        block = LiveBlock{};
        block.sequence = total - 1;
        block.allocation = event;
        block.prepared_ahead = preparing_input_ahead;  // the allocating thread's
        break;
      }
      case EventKind::Free: live.erase(address); break;
      case EventKind::Retag:
        if (auto found = live.find(address); found != live.end()) found->second.allocation.category = event.category;
        break;
      case EventKind::SegmentAllocate:
        segments_of(event.device)[event.address] = Segment{event.block_bytes, event.stream, event.small_pool};
        break;
      case EventKind::SegmentFree: segments_of(event.device).erase(event.address); break;
    }
  }

  // The op that allocated `block`: the ring's copy (named after the fact) while kept.
  uint32_t op_of(const LiveBlock& block) const {
    if (block.before_recording) return 0;
    if (block.sequence >= oldest() && block.sequence < total) return ring[block.sequence % ring.size()].op;
    return block.allocation.op;
  }

  // A free or re-tag outside any op or module (a tensor dropped between ops, AccumulateGrad
  // re-tagging a gradient, zero_grad freeing it) takes what it lacks from the block's
  // allocation: the op and module that made the block.
  void label_from_allocation(StoredEvent& event) const {
    auto found = live.find(reinterpret_cast<const void*>(event.address));
    if (found == live.end()) return;
    if (event.op == 0) event.op = op_of(found->second);
    if (event.module == 0) event.module = found->second.allocation.module;
  }

  // The segments with their live blocks, by device and address.
  std::vector<RecordedSegment> recorded_segments() const {
    std::vector<RecordedSegment> recorded;
    for (const auto& [device, table] : segments) {
      std::vector<const LiveBlock*> blocks;
      for (const auto& [address, block] : live) {
        if (block.allocation.device == device) blocks.push_back(&block);
      }
      std::sort(blocks.begin(), blocks.end(),
                [](const LiveBlock* a, const LiveBlock* b) { return a->allocation.address < b->allocation.address; });
      auto next_block = blocks.begin();
      for (const auto& [address, segment] : table) {
        RecordedSegment& out = recorded.emplace_back();
        out.device = device;
        out.address = address;
        out.bytes = segment.bytes;
        out.stream = segment.stream;
        out.small_pool = segment.small_pool;
        while (next_block != blocks.end() && (*next_block)->allocation.address < address) ++next_block;
        for (; next_block != blocks.end() && (*next_block)->allocation.address < address + segment.bytes; ++next_block) {
          const LiveBlock& block = **next_block;
          out.live_blocks.push_back(RecordedBlock{.address = block.allocation.address,
                                                  .block_bytes = block.allocation.block_bytes,
                                                  .requested_bytes = block.allocation.bytes,
                                                  .category = block.allocation.category,
                                                  .op = detail::label_text(op_of(block)),
                                                  .module_path = detail::label_text(block.allocation.module),
                                                  .step = block.allocation.step,
                                                  .before_recording = block.before_recording});
        }
      }
    }
    return recorded;
  }

  void store(const StoredEvent& event, const MemoryStats& stats) {
    // A device's first event: its baseline is the allocator's state before it.
    if (baseline_of(event.device) == nullptr) {
      DeviceBaseline& baseline = baselines.emplace_back(DeviceBaseline{event.device, {}});
      for (int c = 0; c < kNumMemoryCategories; ++c) baseline.category_bytes[c] = stats.category_bytes[c].current;
      apply_to(baseline.category_bytes, event, -1);
    }
    StoredEvent& slot = ring[total % ring.size()];
    // The dropped event moves into the baseline, so the kept events still add up.
    if (total >= ring.size()) apply_to(baseline_of(slot.device)->category_bytes, slot, +1);
    slot = event;
    ++total;
  }
};

namespace {

// What the running Recorder hears from the allocators (installed by start(), removed by
// stop()). One instance for the process, never destroyed: an allocator may still be inside
// a call when stop() removes it, and finds no running state then.
class RecorderListener final : public AllocatorObserver {
 public:
  void on_existing_segments(Device device, const std::vector<SegmentState>& segments) override {
    std::lock_guard<std::mutex> lock(recorder_mutex());
    Recorder::State* state = running_state;
    if (state == nullptr) return;
    if (state->options.device && *state->options.device != device) return;
    state->add_existing(device, segments);
  }

  void on_allocator_event(const AllocatorEvent& allocator_event, const MemoryStats& stats) override {
    const detail::Context& context = detail::current_context();
    std::lock_guard<std::mutex> lock(recorder_mutex());
    Recorder::State* state = running_state;
    if (state == nullptr) return;
    if (state->options.device && *state->options.device != allocator_event.device) return;
    StoredEvent event{
        .time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - state->start_time).count(),
        .bytes = allocator_event.bytes,
        .allocated_bytes = stats.allocated_bytes.current,
        .reserved_bytes = stats.reserved_bytes.current,
        .address = reinterpret_cast<uintptr_t>(allocator_event.address),
        .block_bytes = allocator_event.block_bytes,
        .stream = allocator_event.stream,
        .device = allocator_event.device,
        .small_pool = allocator_event.small_pool,
        .step = state->step,
        .op = context.op,
        .module = context.module,
        .thread = thread_number(),
        .kind = allocator_event.kind,
        .category = allocator_event.category,
        .previous_category = allocator_event.previous_category,
        .phase = context.phase};
    if (event.kind == EventKind::Free || event.kind == EventKind::Retag) state->label_from_allocation(event);
    state->store(event, stats);
    if (allocator_event.address != nullptr) state->track(allocator_event.address, event);
  }

  // For live_tensors(): the shape and dtype of the tensor a recorded block holds.
  void on_tensor_allocated(const void* address, const Shape& sizes, DType dtype) override {
    std::lock_guard<std::mutex> lock(recorder_mutex());
    if (running_state == nullptr) return;
    auto found = running_state->live.find(address);
    if (found == running_state->live.end()) return;
    found->second.described = true;
    found->second.sizes = sizes;
    found->second.dtype = dtype;
  }
};

RecorderListener& recorder_listener() {
  static auto* const listener = new RecorderListener();  // never destroyed (see above)
  return *listener;
}

}  // namespace

Recorder::Recorder(RecorderOptions options) : state_(std::make_unique<State>()) {
  MG_CHECK(options.capacity > 0, "Recorder: capacity must be at least 1 event, got 0. Hint: the default keeps ",
           RecorderOptions{}.capacity, " events.");
  state_->options = options;
  state_->ring.resize(options.capacity);
}

Recorder::~Recorder() { stop(); }

void Recorder::start() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (state_->running) return;
  MG_CHECK(running_state == nullptr, "Recorder::start: another memory Recorder is running. Hint: stop() it "
           "first; one recorder sees every allocation, so two are never needed.");
  set_allocator_observer(&recorder_listener());
  state_->total = 0;
  state_->baselines.clear();
  state_->step_start_ns.assign(1, 0);
  state_->step = 0;
  state_->node_modules.clear();
  state_->live.clear();
  state_->segments.clear();
  state_->start_time = Clock::now();
  state_->running = true;
  state_->recording = ++recordings_started;
  running_state = state_.get();
  detail::running_recorders.fetch_add(1, std::memory_order_relaxed);
  detail::context_readers.fetch_add(1, std::memory_order_relaxed);
}

void Recorder::stop() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (!state_->running) return;
  state_->running = false;
  running_state = nullptr;
  set_allocator_observer(nullptr);
  detail::running_recorders.fetch_sub(1, std::memory_order_relaxed);
  detail::context_readers.fetch_sub(1, std::memory_order_relaxed);
}

bool Recorder::running() const {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  return state_->running;
}

void Recorder::next_step() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  state_->step += 1;
  state_->step_start_ns.push_back(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - state_->start_time).count());
}

int64_t Recorder::step() const {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  return state_->step;
}

int64_t Recorder::dropped_events() const {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  return static_cast<int64_t>(state_->oldest());
}

RecordedTimeline Recorder::timeline() const {
  // Copied under the lock, resolved (labels to strings) after it.
  std::vector<StoredEvent> stored;
  RecordedTimeline timeline;
  {
    std::lock_guard<std::mutex> lock(recorder_mutex());
    const State& state = *state_;
    stored.reserve(state.total - state.oldest());
    for (uint64_t s = state.oldest(); s < state.total; ++s) stored.push_back(state.ring[s % state.ring.size()]);
    timeline.baselines = state.baselines;
    timeline.step_start_ns = state.step_start_ns;
    timeline.dropped_events = static_cast<int64_t>(state.oldest());
    timeline.capacity = state.ring.size();
    timeline.segments = state.recorded_segments();
  }
  timeline.events.reserve(stored.size());
  for (const StoredEvent& event : stored) {
    timeline.events.push_back(MemoryEvent{.time_ns = event.time_ns,
                                          .device = event.device,
                                          .kind = event.kind,
                                          .bytes = event.bytes,
                                          .category = event.category,
                                          .previous_category = event.previous_category,
                                          .op = detail::label_text(event.op),
                                          .module_path = detail::label_text(event.module),
                                          .phase = event.phase,
                                          .step = event.step,
                                          .allocated_bytes = event.allocated_bytes,
                                          .reserved_bytes = event.reserved_bytes,
                                          .address = event.address,
                                          .block_bytes = event.block_bytes,
                                          .stream = event.stream});
  }
  return timeline;
}

std::vector<LiveTensor> Recorder::live_tensors() const {
  std::vector<std::pair<uint64_t, LiveTensor>> found;
  {
    std::lock_guard<std::mutex> lock(recorder_mutex());
    found.reserve(state_->live.size());
    for (const auto& [address, block] : state_->live) {
      if (block.before_recording) continue;
      const StoredEvent& event = block.allocation;
      found.emplace_back(block.sequence, LiveTensor{.device = event.device,
                                                    .bytes = event.bytes,
                                                    .category = event.category,
                                                    .op = detail::label_text(state_->op_of(block)),
                                                    .module_path = detail::label_text(event.module),
                                                    .phase = event.phase,
                                                    .step = event.step,
                                                    .described = block.described,
                                                    .sizes = block.sizes,
                                                    .dtype = block.dtype,
                                                    .prepared_ahead = block.prepared_ahead});
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LiveTensor> tensors;
  tensors.reserve(found.size());
  for (auto& [sequence, tensor] : found) tensors.push_back(std::move(tensor));
  return tensors;
}

std::vector<LiveTensor> Recorder::leaked_tensors(int64_t step) const {
  MG_CHECK(step >= 0 && step < this->step(), "Recorder::leaked_tensors: step ", step, " has not ended (the ",
           "recording is in step ", this->step(), "). Hint: call next_step() after the step, then check it.");
  std::vector<LiveTensor> leaked;
  for (LiveTensor& tensor : live_tensors()) {
    const bool kept_on_purpose = tensor.category == MemoryCategory::Parameter ||
                                 tensor.category == MemoryCategory::Gradient ||
                                 tensor.category == MemoryCategory::OptimizerState;
    if (tensor.step == step && !kept_on_purpose && !tensor.prepared_ahead) leaked.push_back(std::move(tensor));
  }
  return leaked;
}

PreparedInputScope::PreparedInputScope() : previous_(preparing_input_ahead) { preparing_input_ahead = true; }

PreparedInputScope::~PreparedInputScope() { preparing_input_ahead = previous_; }

void mark_input_taken(const void* block) {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (running_state == nullptr) return;
  if (auto found = running_state->live.find(block);
      found != running_state->live.end() && !found->second.before_recording) {
    found->second.prepared_ahead = false;
    found->second.allocation.step = running_state->step;
  }
}

void Recorder::write_json(const std::string& path) const {
  write_text_atomically(path, timeline_json(timeline()) + "\n", "write_json");
}

void Recorder::write_html(const std::string& path) const {
  write_text_atomically(path, timeline_html(timeline()), "write_html");
}

void Recorder::write_pytorch_snapshot(const std::string& path) const {
  write_text_atomically(path, pytorch_snapshot_pickle(timeline()), "write_pytorch_snapshot");
}

void Recorder::write_chrome_trace(const std::string& path) const {
  write_text_atomically(path, chrome_trace_json(timeline()) + "\n", "write_chrome_trace");
}

namespace detail {

void label_forward_op(const void* node, const char* node_name) {
  if (!recording()) return;
  const uint32_t op = intern_label(forward_name(node_name));
  const uint32_t thread = thread_number();
  const uint32_t module = current_context().module;
  std::lock_guard<std::mutex> lock(recorder_mutex());
  Recorder::State* state = running_state;
  if (state == nullptr) return;
  state->node_modules[node] = module;
  ForwardOpWindow& window = forward_op_window();
  const uint64_t window_start = window.recording == state->recording ? window.start : 0;
  for (uint64_t s = state->total; s > std::max(window_start, state->oldest()); --s) {
    StoredEvent& event = state->ring[(s - 1) % state->ring.size()];
    if (event.thread == thread && event.op == 0) event.op = op;
  }
  window = {state->recording, state->total};
}

uint32_t module_of_node(const void* node) {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (running_state == nullptr) return 0;
  auto it = running_state->node_modules.find(node);
  return it == running_state->node_modules.end() ? 0 : it->second;
}

void close_forward_op_window() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (running_state != nullptr) forward_op_window() = {running_state->recording, running_state->total};
}

std::optional<int64_t> recording_step() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  if (running_state == nullptr) return std::nullopt;
  return running_state->step;
}

}  // namespace detail

}  // namespace mg::memory
