// memory/timeline_levels.h — how many requested bytes each category holds after each event
// of one device in a recording: its baseline plus the events so far. The exporters that
// draw levels (chrome_trace.h) or report a peak (pytorch_snapshot.h) add them up here,
// the one way the page's script (timeline_html.cpp) does too.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "memgrad/memory/recorder.h"

namespace mg::memory {

using CategoryBytes = std::array<int64_t, kNumMemoryCategories>;

// Calls `visit(event_index, bytes)` after each event of `baseline.device`, oldest first
// (segment events change no category, and are visited with the levels unchanged).
void for_each_level(const RecordedTimeline& timeline, const DeviceBaseline& baseline,
                    const std::function<void(size_t event_index, const CategoryBytes& bytes)>& visit);

// The most requested bytes (all categories together) `baseline.device` held at once during
// the recording, its baseline included: the peak the page and the snapshot's replay show.
int64_t peak_requested_bytes(const RecordedTimeline& timeline, const DeviceBaseline& baseline);

}  // namespace mg::memory
