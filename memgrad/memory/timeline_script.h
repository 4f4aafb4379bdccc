// memory/timeline_script.h — the script of the timeline page (timeline_html.h): it reads
// the recording from the page's JSON block and draws it, and redraws on every zoom, pan,
// legend toggle and hover.
//
// What it draws: per device (a selector when there are several), a stacked area of the
// requested bytes of each category shown, the allocated and reserved lines, step
// boundaries and a phase band; under it, the largest live allocations at the moment under
// the cursor, and the segments with the blocks in them at the moment last clicked (at
// first the end of the recording).
//
// How: events are kept in full. A view [t0, t1] draws every event in it while they are
// few; beyond four per pixel column, each column keeps the event with the largest total
// (peaks never vanish) and its last one (levels stay right), chosen from the events in
// the view, so zooming in shows detail the whole view thinned away. Which blocks are alive
// at an event (the allocation view, the segment view) is worked out once when the page
// opens: an allocation lives from its Allocate event to its Free; blocks that predate the
// recording are the ones freed without an Allocate, or alive in the final segments
// without one (as PyTorch's memory_viz finds them).
//
// For tests and tools the script exposes window.memgradTimeline: view() (the current
// range, hidden categories, the series drawn), and the hover and pinned event indices.
#pragma once

namespace mg::memory {

const char* timeline_script();

}  // namespace mg::memory
