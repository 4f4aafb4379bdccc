// core/graph_capture.cpp — the calling thread's capture, the live graphs, the refusal message.
#include "memgrad/core/graph_capture.h"

#include <mutex>
#include <string>
#include <unordered_set>

#include "memgrad/core/error.h"

namespace mg {

namespace {

thread_local uint64_t capture_underway = 0;  // the id of this thread's capture, 0 when none

struct LiveGraphs {
  std::mutex mutex;
  uint64_t last_id = 0;
  std::unordered_set<uint64_t> ids;
};

LiveGraphs& live_graphs() {
  static LiveGraphs* const graphs = new LiveGraphs();  // leaked: graphs may die during exit
  return *graphs;
}

}  // namespace

bool graph_capture_underway() { return capture_underway != 0; }

uint64_t current_graph_capture() { return capture_underway; }

void refuse_during_graph_capture(std::string_view operation, std::string_view hint) {
  if (capture_underway == 0) return;
  throw Error(std::string(operation) +
              " during CUDA graph capture: a captured step replays on the device alone, without "
              "the host, so it cannot wait for the device, read device values on the host or "
              "draw on host state. Hint: " + std::string(hint));
}

bool graph_capture_live(uint64_t id) {
  LiveGraphs& graphs = live_graphs();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  return graphs.ids.count(id) == 1;
}

void retire_graph_capture(uint64_t id) {
  LiveGraphs& graphs = live_graphs();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  graphs.ids.erase(id);
}

GraphCaptureScope::GraphCaptureScope() {
  MG_CHECK(capture_underway == 0, "a CUDA graph capture is already underway on this thread. Hint: capture one "
           "step at a time; a CapturedStep cannot be made inside another's step.");
  LiveGraphs& graphs = live_graphs();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  id_ = ++graphs.last_id;
  graphs.ids.insert(id_);
  capture_underway = id_;
}

GraphCaptureScope::~GraphCaptureScope() { capture_underway = 0; }

}  // namespace mg
