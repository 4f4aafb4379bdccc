// memory/timeline_html.h — a recorded memory timeline as one self-contained HTML page:
// per device, an inline SVG stacked area of requested bytes by category over time (one
// colour per category, with a legend), the allocator's allocated and reserved bytes as
// lines, step boundaries, a band showing the phase (forward, backward, optimizer), and a
// small inline script that shows the nearest event under the mouse. No network resources,
// so the page opens anywhere, offline, and can be attached to a bug report.
#pragma once

#include <string>

#include "memgrad/memory/recorder.h"

namespace mg::memory {

std::string timeline_html(const RecordedTimeline& timeline);

}  // namespace mg::memory
