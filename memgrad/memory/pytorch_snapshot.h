// memory/pytorch_snapshot.h — a recording in PyTorch's memory snapshot format: the dict
// torch.cuda.memory._snapshot() returns, pickled, so that pytorch.org/memory_viz and
// torch.cuda._memory_viz (trace_plot, segment_plot, segsum, trace) open a memgrad run the
// way they open a PyTorch one.
//
//   {'segments': [{'device', 'address', 'total_size', 'allocated_size', 'active_size',
//                  'requested_size', 'stream', 'segment_type': 'small' | 'large',
//                  'expandable', 'frames',
//                  'blocks': [{'address', 'size', 'requested_size',
//                              'state': 'active_allocated' | 'inactive', 'frames'}]}],
//    'device_traces': [[{'action': 'alloc' | 'free_requested' | 'free_completed' |
//                                  'segment_alloc' | 'segment_free',
//                        'addr', 'size', 'stream', 'time_us', 'frames'}]],   # per device
//    'memgrad': {...}}   # ours: what was recorded, and the peak to check a replay against
//
// As in PyTorch: segments are the allocator's state at the end of the trace (here: of the
// recording), their blocks tile them in address order (free bytes as 'inactive' blocks),
// a trace entry's 'size' is the requested size (a segment's: its size), a block's 'size'
// the rounded one. Blocks allocated before the recording are found as PyTorch's tools
// find them: alive in the segments but never allocated in the trace, or freed in it.
//
// Frames: PyTorch records Python and C++ stack frames; memgrad knows the op and module
// instead, so each entry has two frames: {'filename': module path or '(no module)',
// 'line': step, 'name': op or '(no op)'} and {'filename': 'memgrad', 'line': 0, 'name':
// '<CATEGORY> <phase>'}. The tools show a frame as "filename:line:name".
//
// Devices: 'device_traces' is indexed by device: cuda:k at k. A recording of the CPU (or
// the simulated device) with no CUDA device in it is written as device 0; next to CUDA
// devices, its events are left out (PyTorch's format has no place for them).
// Re-tags (a block changing category) have no PyTorch action and are left out too.
#pragma once

#include <string>

#include "memgrad/memory/recorder.h"

namespace mg::memory {

// The pickle's bytes (protocol 2).
std::string pytorch_snapshot_pickle(const RecordedTimeline& timeline);

}  // namespace mg::memory
