// tests/memory/recording/write_memory_recording.cpp — records a few training steps of a
// small GPT on the CPU and writes every form of the recording, for the checks that read
// them outside C++ (check_memory_exports.py: Python's pickle and json; the browser test,
// check_timeline_page.py: headless Chromium).
//
//   write_memory_recording OUT_DIR [--events N]
//
// writes OUT_DIR/timeline.html, snapshot.pickle, trace.json, recording.json (the
// Recorder's own JSON, the reference the checks compare with) and figures.json (events,
// peak, how many events carry no op or no module). With --events N it keeps training
// until at least N events are recorded (how the page's open time is measured on a large
// recording).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <memgrad/core/allocator/registry.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/context.h>
#include <memgrad/memory/recorder.h>
#include <memgrad/memory/timeline_levels.h>
#include <memgrad/nn/gpt.h>
#include <memgrad/optim/adam.h>

namespace {

int usage() {
  std::fprintf(stderr, "usage: write_memory_recording OUT_DIR [--events N]\n");
  return 2;
}

void write_figures(const std::filesystem::path& folder, const mg::memory::RecordedTimeline& timeline) {
  int64_t no_op = 0, no_module = 0, block_events = 0;
  for (const mg::memory::MemoryEvent& event : timeline.events) {
    if (mg::is_segment_event(event.kind)) continue;  // a segment belongs to no op
    ++block_events;
    no_op += event.op.empty();
    no_module += event.module_path.empty();
  }
  mg::JsonWriter json;
  json.begin_object()
      .key("events").value(static_cast<int64_t>(timeline.events.size()))
      .key("block_events").value(block_events)
      .key("block_events_without_op").value(no_op)
      .key("block_events_without_module").value(no_module)
      .key("peak_requested_bytes").value(mg::memory::peak_requested_bytes(timeline, timeline.baselines.at(0)));
  json.key("files").begin_object();
  for (const char* name : {"timeline.html", "snapshot.pickle", "trace.json", "recording.json"}) {
    json.key(name).value(static_cast<int64_t>(std::filesystem::file_size(folder / name)));
  }
  json.end_object().end_object();
  std::ofstream(folder / "figures.json") << json.str() << "\n";
  std::printf("%s\n", json.str().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) return usage();
  const std::filesystem::path folder = argv[1];
  int64_t wanted_events = 0;
  if (argc == 4) {
    if (std::string(argv[2]) != "--events") return usage();
    wanted_events = std::atoll(argv[3]);
  }
  std::filesystem::create_directories(folder);

  mg::manual_seed(0);
  // Made before the recording starts, as a program does: its parameters are blocks the
  // recording finds in the allocator's segments, not in its events.
  mg::nn::GPT model(mg::nn::GPTOptions{.n_layer = 2, .n_head = 2, .n_embd = 128, .block_size = 64, .vocab_size = 256});
  mg::optim::AdamW optimizer(model.parameters());
  const size_t capacity = std::max<size_t>(mg::memory::RecorderOptions{}.capacity, 2 * wanted_events);
  mg::memory::Recorder recorder({.capacity = capacity, .device = mg::Device::cpu()});
  recorder.start();
  for (int64_t step = 0; step < 3 || static_cast<int64_t>(recorder.timeline().events.size()) < wanted_events;
       ++step) {
    const mg::Tensor tokens = mg::randint(0, 256, {16, 65});  // (B, T + 1)
    const mg::Tensor inputs = tokens.narrow(1, 0, 64).contiguous();
    const mg::Tensor targets = tokens.narrow(1, 1, 64).contiguous();
    optimizer.zero_grad();
    mg::Tensor loss;
    {
      mg::memory::PhaseScope forward(mg::memory::Phase::Forward);
      loss = model.loss(inputs, targets);
    }
    loss.backward();
    optimizer.step();
    recorder.next_step();
  }
  // Handing the cache back, as a program that is done with its memory does: the segments
  // the MLP's 2 MiB activations took (large-pool ones) go back, and the trace holds
  // segment_free beside segment_alloc.
  mg::allocator_for(mg::Device::cpu()).empty_cache();
  recorder.stop();
  recorder.write_html((folder / "timeline.html").string());
  recorder.write_pytorch_snapshot((folder / "snapshot.pickle").string());
  recorder.write_chrome_trace((folder / "trace.json").string());
  recorder.write_json((folder / "recording.json").string());
  write_figures(folder, recorder.timeline());
  return 0;
}
