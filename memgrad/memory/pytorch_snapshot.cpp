// memory/pytorch_snapshot.cpp — RecordedTimeline -> PyTorch's memory snapshot dict.
#include "memgrad/memory/pytorch_snapshot.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "memgrad/io/pickle_writer.h"
#include "memgrad/memory/timeline_levels.h"

namespace mg::memory {
namespace {

// Where `device` goes in 'device_traces' (nullopt: left out; see the header).
std::optional<int> trace_index(const Device& device, bool any_cuda) {
  if (device.is_cuda()) return device.index;
  if (any_cuda) return std::nullopt;
  return 0;
}

void write_frames(PickleWriter& pickle, const std::string& op, const std::string& module_path, int64_t step,
                  MemoryCategory category, Phase phase) {
  pickle.key("frames").begin_list();
  pickle.begin_dict()
      .key("filename").value(module_path.empty() ? "(no module)" : module_path)
      .key("line").value(step)
      .key("name").value(op.empty() ? "(no op)" : op)
      .end_dict();
  pickle.begin_dict()
      .key("filename").value("memgrad")
      .key("line").value(0)
      .key("name").value(std::string(category_name(category)) + " " + phase_name(phase))
      .end_dict();
  pickle.end_list();
}

void write_trace_entry(PickleWriter& pickle, const char* action, const MemoryEvent& event, int64_t size,
                       bool with_frames) {
  pickle.begin_dict()
      .key("action").value(action)
      .key("addr").value(event.address)
      .key("size").value(size)
      .key("stream").value(event.stream)
      .key("time_us").value(event.time_ns / 1000);
  if (with_frames) {
    write_frames(pickle, event.op, event.module_path, event.step, event.category, event.phase);
  } else {
    pickle.key("frames").begin_list().end_list();
  }
  pickle.end_dict();
}

void write_segment(PickleWriter& pickle, const RecordedSegment& segment, int index) {
  int64_t allocated = 0, requested = 0;
  for (const RecordedBlock& block : segment.live_blocks) {
    allocated += block.block_bytes;
    requested += block.requested_bytes;
  }
  pickle.begin_dict()
      .key("device").value(index)
      .key("address").value(segment.address)
      .key("total_size").value(segment.bytes)
      .key("allocated_size").value(allocated)
      .key("active_size").value(allocated)
      .key("requested_size").value(requested)
      .key("stream").value(segment.stream)
      .key("segment_type").value(segment.small_pool ? "small" : "large")
      .key("expandable").value(false)
      .key("frames").begin_list().end_list();
  // The blocks tile the segment: a free gap before each live block, and after the last.
  pickle.key("blocks").begin_list();
  auto free_block = [&](uintptr_t from, uintptr_t to) {
    if (to <= from) return;
    pickle.begin_dict()
        .key("address").value(from)
        .key("size").value(static_cast<int64_t>(to - from))
        .key("requested_size").value(0)
        .key("state").value("inactive")
        .key("frames").begin_list().end_list()
        .end_dict();
  };
  uintptr_t cursor = segment.address;
  for (const RecordedBlock& block : segment.live_blocks) {
    free_block(cursor, block.address);
    pickle.begin_dict()
        .key("address").value(block.address)
        .key("size").value(block.block_bytes)
        .key("requested_size").value(block.requested_bytes)
        .key("state").value("active_allocated");
    if (block.before_recording) {
      pickle.key("frames").begin_list().end_list();  // "allocated before history was recorded"
    } else {
      write_frames(pickle, block.op, block.module_path, block.step, block.category, Phase::Other);
    }
    pickle.end_dict();
    cursor = block.address + static_cast<uintptr_t>(block.block_bytes);
  }
  free_block(cursor, segment.address + static_cast<uintptr_t>(segment.bytes));
  pickle.end_list().end_dict();
}

}  // namespace

std::string pytorch_snapshot_pickle(const RecordedTimeline& timeline) {
  bool any_cuda = false;
  int traces = 0;
  for (const DeviceBaseline& baseline : timeline.baselines) any_cuda = any_cuda || baseline.device.is_cuda();
  for (const RecordedSegment& segment : timeline.segments) any_cuda = any_cuda || segment.device.is_cuda();
  for (const DeviceBaseline& baseline : timeline.baselines) {
    if (auto index = trace_index(baseline.device, any_cuda)) traces = std::max(traces, *index + 1);
  }
  for (const RecordedSegment& segment : timeline.segments) {
    if (auto index = trace_index(segment.device, any_cuda)) traces = std::max(traces, *index + 1);
  }

  PickleWriter pickle;
  pickle.begin_dict();
  pickle.key("segments").begin_list();
  for (const RecordedSegment& segment : timeline.segments) {
    if (auto index = trace_index(segment.device, any_cuda)) write_segment(pickle, segment, *index);
  }
  pickle.end_list();

  pickle.key("device_traces").begin_list();
  for (int index = 0; index < traces; ++index) {
    pickle.begin_list();
    for (const MemoryEvent& event : timeline.events) {
      if (trace_index(event.device, any_cuda) != index) continue;
      switch (event.kind) {
        case EventKind::Allocate: write_trace_entry(pickle, "alloc", event, event.bytes, true); break;
        case EventKind::Free:
          // memgrad's free is immediate for the recording; a block held back for other
          // streams is not reused until they are done, which PyTorch's pair also expresses.
          write_trace_entry(pickle, "free_requested", event, -event.bytes, true);
          write_trace_entry(pickle, "free_completed", event, -event.bytes, true);
          break;
        case EventKind::SegmentAllocate: write_trace_entry(pickle, "segment_alloc", event, event.bytes, false); break;
        case EventKind::SegmentFree: write_trace_entry(pickle, "segment_free", event, -event.bytes, false); break;
        case EventKind::Retag: break;
      }
    }
    pickle.end_list();
  }
  pickle.end_list();

  // Ours: which memgrad device each index is, and the figures a replay must reproduce.
  pickle.key("memgrad").begin_dict().key("format").value("memgrad.pytorch_memory_snapshot");
  pickle.key("dropped_events").value(timeline.dropped_events);
  pickle.key("devices").begin_list();
  for (const DeviceBaseline& baseline : timeline.baselines) {
    const auto index = trace_index(baseline.device, any_cuda);
    if (!index) continue;
    int64_t peak_allocated = 0;
    for (const MemoryEvent& event : timeline.events) {
      if (event.device == baseline.device) peak_allocated = std::max(peak_allocated, event.allocated_bytes);
    }
    pickle.begin_dict()
        .key("index").value(*index)
        .key("device").value(baseline.device.str())
        .key("peak_requested_bytes").value(peak_requested_bytes(timeline, baseline))
        .key("peak_allocated_bytes").value(peak_allocated)
        .end_dict();
  }
  pickle.end_list().end_dict();
  pickle.end_dict();
  return pickle.bytes();
}

}  // namespace mg::memory
