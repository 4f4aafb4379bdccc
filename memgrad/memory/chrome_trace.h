// memory/chrome_trace.h — a recording as Chrome Trace Event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: memory beside time, in the tools people
// already read profiles with.
//
// Per device one process ("memgrad <device>"), holding:
// - counter tracks ("ph": "C"): one per memory category present (requested bytes), and the
//   allocator's allocated and reserved bytes; a value is written whenever it changes;
// - slices ("ph": "X") on three threads: "steps" (step k), "phases" (forward, backward,
//   optimizer), "ops" (each run of events with the same op and module, named by the op,
//   with the module, the events and the bytes they allocated in its args).
// Times are microseconds since the recording started. A slice runs from its first event
// to the first event of the next one (a step: to the next step's start), so slices tile
// the time without overlapping.
#pragma once

#include <string>

#include "memgrad/memory/recorder.h"

namespace mg::memory {

// The JSON text: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
std::string chrome_trace_json(const RecordedTimeline& timeline);

}  // namespace mg::memory
