// tests/memory/test_memory_recorder.cpp — mg::memory::Recorder: what a training step
// records (categories, ops, module paths, phases, steps), the ring buffer's wraparound,
// silence when nothing records, and the JSON and HTML exports.
//
// Other tests in this program leave nothing running, but may hold memory on the CPU, so
// checks on totals use the recorder's own baseline, never absolute values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memgrad/autograd/loss.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/io/json_parse.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/gpt.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/resnet.h"
#include "memgrad/nn/sequential.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/sgd.h"

namespace {

using mg::MemoryCategory;
using mg::memory::EventKind;
using mg::memory::MemoryEvent;
using mg::memory::Phase;
using mg::memory::Recorder;

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mg_test_recorder_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

template <class Predicate>
bool any_event(const std::vector<MemoryEvent>& events, Predicate predicate) {
  return std::any_of(events.begin(), events.end(), predicate);
}

// Sequential(Sequential(Linear, ReLU), Linear): module paths "0.0", "0.1" and "1".
std::shared_ptr<mg::nn::Sequential> tiny_model() {
  mg::manual_seed(3);
  return std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Sequential>(std::make_shared<mg::nn::Linear>(4, 16), std::make_shared<mg::nn::ReLU>()),
      std::make_shared<mg::nn::Linear>(16, 3));
}

}  // namespace

TEST_CASE("Recorder names a checkpoint's recomputed allocations by the forward's module paths",
          "[memory_recorder]") {
  mg::Generator generator(4);
  auto model = mg::nn::resnet18({.num_classes = 3,
                                 .small_image_stem = true,
                                 .in_channels = 1,
                                 .generator = &generator,
                                 .checkpoint_stages = mg::nn::BlockCheckpoint::Whole});
  model->train();
  const mg::Tensor inputs = mg::randn({2, 1, 8, 8}, {}, &generator);
  const mg::Tensor targets = mg::randint(0, 3, {2}, {.dtype = mg::DType::Int64}, &generator);

  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::cross_entropy((*model)(inputs), targets).backward();
  recorder.stop();
  const std::vector<MemoryEvent> events = recorder.timeline().events;

  auto starts_with = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
  // The stage ran twice: once under no_grad in the forward, once in backward to record its
  // graph; both times its convolutions are "layer1.0.conv1" and so on.
  CHECK(any_event(events, [&](const MemoryEvent& e) {
    return e.phase == Phase::Forward && starts_with(e.module_path, "layer1.0.conv1");
  }));
  CHECK(any_event(events, [&](const MemoryEvent& e) {
    return e.phase == Phase::Backward && e.kind == EventKind::Allocate && starts_with(e.module_path, "layer1.0.conv1");
  }));
  // No path lost its stage's name in the recompute.
  CHECK_FALSE(any_event(events, [&](const MemoryEvent& e) { return starts_with(e.module_path, "0."); }));
  // A batch norm with its ReLU fused (BatchNorm2d::forward_relu) is named as the layer.
  CHECK(any_event(events, [&](const MemoryEvent& e) {
    return e.phase == Phase::Forward && e.kind == EventKind::Allocate && e.module_path == "layer1.0.bn1";
  }));
  // The checkpointed forward's allocations are named after the checkpoint.
  CHECK(any_event(events, [](const MemoryEvent& e) { return e.op == "Checkpoint"; }));
}

TEST_CASE("Recorder lists the live tensors a step left behind with their shapes, ops and modules",
          "[memory_recorder]") {
  auto model = tiny_model();
  mg::optim::SGD optimizer(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  const mg::Tensor inputs = mg::randn({8, 4});
  const mg::Tensor targets = mg::randint(0, 3, {8}, {.dtype = mg::DType::Int64});

  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  {  // step 0: a training step done right leaves only what a step keeps on purpose
    optimizer.zero_grad();
    mg::Tensor loss = mg::cross_entropy((*model)(inputs), targets);
    loss.backward();
    optimizer.step();
    CHECK(loss.item<double>() > 0);
  }
  recorder.next_step();
  // step 1: an evaluation outside no_grad that keeps its outputs keeps their graphs too
  std::vector<mg::Tensor> kept_outputs;
  for (int i = 0; i < 2; ++i) kept_outputs.push_back((*model)(inputs));
  recorder.next_step();

  CHECK(recorder.leaked_tensors(0).empty());
  const std::vector<mg::memory::LiveTensor> leaked = recorder.leaked_tensors(1);
  auto has = [&](MemoryCategory category, const std::string& module, const mg::Shape& sizes) {
    return std::any_of(leaked.begin(), leaked.end(), [&](const mg::memory::LiveTensor& tensor) {
      return tensor.category == category && tensor.module_path == module && tensor.described && tensor.sizes == sizes &&
             tensor.dtype == mg::DType::Float32 && tensor.step == 1;
    });
  };
  CHECK(has(MemoryCategory::Activation, "0.1", mg::Shape{8, 16}));  // the ReLU outputs the graphs saved
  CHECK(has(MemoryCategory::Temporary, "1", mg::Shape{8, 3}));      // the kept outputs themselves
  // Everything a step keeps on purpose (momentum buffers, gradients) is live but no leak.
  const std::vector<mg::memory::LiveTensor> live = recorder.live_tensors();
  CHECK(std::any_of(live.begin(), live.end(), [](const mg::memory::LiveTensor& tensor) {
    return tensor.category == MemoryCategory::OptimizerState && tensor.step == 0;
  }));

  const std::string report = mg::memory::live_tensor_report(leaked, "left behind by step 1");
  INFO(report);
  CHECK_THAT(report, Catch::Contains("left behind by step 1: " + std::to_string(leaked.size()) + " tensors"));
  CHECK_THAT(report, Catch::Contains("ACTIVATION"));
  CHECK_THAT(report, Catch::Contains("[8, 16] float32 x2"));
  CHECK_THROWS_WITH(recorder.leaked_tensors(2), Catch::Contains("has not ended"));

  kept_outputs.clear();  // the graphs die with the outputs
  CHECK(recorder.leaked_tensors(1).empty());
}

TEST_CASE("Recorder records nothing when it is not running", "[memory_recorder]") {
  Recorder recorder({.device = mg::Device::cpu()});
  mg::Tensor before = mg::zeros({64, 64});
  recorder.start();
  recorder.stop();
  mg::Tensor after = mg::zeros({64, 64});
  after = mg::Tensor();
  CHECK(recorder.timeline().events.empty());
  CHECK_FALSE(recorder.running());
  CHECK_FALSE(mg::memory::detail::recording());
}

TEST_CASE("Recorder captures categories ops module paths and phases of a training step", "[memory_recorder]") {
  auto model = tiny_model();
  mg::optim::SGD optimizer(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  const mg::Tensor inputs = mg::randn({8, 4});
  const mg::Tensor targets = mg::randint(0, 3, {8}, {.dtype = mg::DType::Int64});

  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::Tensor loss = mg::cross_entropy((*model)(inputs), targets);
  loss.backward();
  optimizer.step();
  recorder.next_step();
  optimizer.zero_grad();
  loss = mg::Tensor();
  mg::Tensor second = (*model)(inputs);
  recorder.stop();
  const std::vector<MemoryEvent> events = recorder.timeline().events;
  REQUIRE(!events.empty());

  // Forward: the first Linear's output, labelled with its op and nested module path.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Allocate && e.phase == Phase::Forward && e.op == "Linear" && e.module_path == "0.0";
  }));
  CHECK(any_event(events, [](const MemoryEvent& e) { return e.phase == Phase::Forward && e.module_path == "1"; }));
  // Saving the ReLU's output for backward re-tags it ACTIVATION.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Retag && e.category == MemoryCategory::Activation && e.module_path == "0.1" &&
           e.op == "Relu";
  }));
  // Backward: a leaf's gradient, made by a node and re-tagged GRADIENT when accumulated.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Retag && e.phase == Phase::Backward && e.category == MemoryCategory::Gradient &&
           e.op == "AccumulateGrad";
  }));
  // A backward node's events carry the module path its forward op was recorded under.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.phase == Phase::Backward && e.op == "LinearBackward" && (e.module_path == "0.0" || e.module_path == "1");
  }));
  // The optimizer's momentum buffers.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Allocate && e.phase == Phase::Optimizer &&
           e.category == MemoryCategory::OptimizerState && e.step == 0;
  }));
  // zero_grad and the second forward belong to step 1, outside any phase or inside forward.
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Free && e.category == MemoryCategory::Gradient && e.phase == Phase::Other &&
           e.step == 1;
  }));
  CHECK(any_event(events, [](const MemoryEvent& e) { return e.phase == Phase::Forward && e.step == 1; }));
  // Time runs forward; allocated never falls below requested bytes of one block.
  for (size_t i = 1; i < events.size(); ++i) CHECK(events[i].time_ns >= events[i - 1].time_ns);
  for (const MemoryEvent& e : events) CHECK(e.reserved_bytes >= e.allocated_bytes);
}

TEST_CASE("Recorder ring buffer keeps the newest events and counts the dropped ones", "[memory_recorder]") {
  // NOTE: a cached small segment first, so that the ten small blocks need no new one (a
  // segment_allocate event would be an eleventh event).
  { mg::Tensor warm = mg::empty({1000}); }
  Recorder recorder({.capacity = 4, .device = mg::Device::cpu()});
  recorder.start();
  std::vector<mg::Tensor> tensors;
  for (int64_t i = 1; i <= 10; ++i) tensors.push_back(mg::empty({i * 100}));  // 10 allocations, 400*i bytes
  recorder.stop();
  const mg::memory::RecordedTimeline timeline = recorder.timeline();
  CHECK(recorder.dropped_events() == 6);
  CHECK(timeline.dropped_events == 6);
  REQUIRE(timeline.events.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(timeline.events[i].bytes == static_cast<int64_t>(7 + i) * 400);
  // The dropped events moved into the baseline: baseline plus kept events is the truth.
  REQUIRE(timeline.baselines.size() == 1);
  int64_t temporary = timeline.baselines[0].category_bytes[static_cast<int>(MemoryCategory::Temporary)];
  for (const MemoryEvent& e : timeline.events) temporary += e.bytes;
  CHECK(temporary == mg::memory::snapshot().category(MemoryCategory::Temporary).current);
}

TEST_CASE("Recorder refuses a second running recorder and a zero capacity", "[memory_recorder]") {
  Recorder first;
  first.start();
  Recorder second;
  CHECK_THROWS_AS(second.start(), mg::Error);
  first.stop();
  CHECK_NOTHROW(second.start());
  CHECK_THROWS_AS(Recorder({.capacity = 0}), mg::Error);
}

TEST_CASE("Recorder writes a self-contained HTML page and JSON that parses", "[memory_recorder]") {
  auto model = tiny_model();
  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::Tensor loss = mg::cross_entropy((*model)(mg::randn({8, 4})), mg::randint(0, 3, {8}, {.dtype = mg::DType::Int64}));
  loss.backward();
  recorder.next_step();
  mg::Tensor in_step_one = mg::zeros({256});
  recorder.stop();

  const std::string html_path = temporary_path("timeline.html");
  recorder.write_html(html_path);
  const std::string html = read_file(html_path);
  // The recording is one JSON block the page's script draws (in a browser:
  // tests/memory/recording/check_timeline_page.py); nothing is fetched from elsewhere.
  const std::string open_tag = "<script type=\"application/json\" id=\"memgrad-data\">";
  const size_t data_start = html.find(open_tag);
  REQUIRE(data_start != std::string::npos);
  const size_t data_end = html.find("</script>", data_start);
  REQUIRE(data_end != std::string::npos);
  const std::string data_text = html.substr(data_start + open_tag.size(), data_end - data_start - open_tag.size());
  const mg::JsonValue data = mg::parse_json(data_text, html_path);
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    CHECK(data_text.find(std::string("\"") + mg::category_name(static_cast<MemoryCategory>(c)) + "\"") !=
          std::string::npos);
  }
  for (const auto& [key, value] : data.members) {
    if (key == "step_start_ns") CHECK(value.elements.size() == 2);
    if (key == "devices") CHECK(value.elements.size() == 1);
  }
  for (const char* network : {"src=", "href=", "@import", "fetch(", "XMLHttpRequest", "url(http"}) {
    CHECK(html.find(network) == std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(html_path + ".tmp"));

  const std::string json_path = temporary_path("timeline.json");
  recorder.write_json(json_path);
  const mg::JsonValue json = mg::parse_json(read_file(json_path), json_path);
  REQUIRE(json.kind == mg::JsonValue::Kind::Object);
  size_t events = 0;
  for (const auto& [key, value] : json.members) {
    if (key == "events") events = value.elements.size();
  }
  CHECK(events == recorder.timeline().events.size());
  CHECK(events > 0);
  std::filesystem::remove(html_path);
  std::filesystem::remove(json_path);

  CHECK_THROWS_AS(recorder.write_html("/nonexistent-folder/timeline.html"), mg::Error);
}

TEST_CASE("Recorder knows the segments and the blocks in them, those from before start() too",
          "[memory_recorder]") {
  mg::Tensor before = mg::zeros({1000});  // 4000 bytes, alive when the recording starts
  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::Tensor during = mg::zeros({3000});  // 12000 bytes
  {
    mg::Tensor freed = mg::zeros({5000});
  }
  recorder.stop();
  const mg::memory::RecordedTimeline timeline = recorder.timeline();
  const auto address_of = [](const mg::Tensor& tensor) {
    return reinterpret_cast<uintptr_t>(tensor.storage()->data());
  };
  const mg::memory::RecordedBlock* found_before = nullptr;
  const mg::memory::RecordedBlock* found_during = nullptr;
  for (const mg::memory::RecordedSegment& segment : timeline.segments) {
    CHECK(segment.device == mg::Device::cpu());
    uintptr_t previous_end = segment.address;
    for (const mg::memory::RecordedBlock& block : segment.live_blocks) {
      CHECK(block.address >= previous_end);  // in address order, inside the segment
      previous_end = block.address + static_cast<uintptr_t>(block.block_bytes);
      if (block.address == address_of(before)) found_before = &block;
      if (block.address == address_of(during)) found_during = &block;
    }
    CHECK(previous_end <= segment.address + static_cast<uintptr_t>(segment.bytes));
  }
  REQUIRE(found_before != nullptr);
  CHECK(found_before->before_recording);
  CHECK(found_before->requested_bytes == 4000);
  CHECK(found_before->op.empty());
  REQUIRE(found_during != nullptr);
  CHECK_FALSE(found_during->before_recording);
  CHECK(found_during->requested_bytes == 12000);
  CHECK(found_during->block_bytes == 12288);  // rounded up to 512
  // live_tensors() still lists only what the recording allocated.
  for (const mg::memory::LiveTensor& tensor : recorder.live_tensors()) CHECK(tensor.bytes != 4000);
  // Every event of a block carries its address; the freed one's allocate and free agree.
  std::map<uintptr_t, int64_t> open;
  for (const MemoryEvent& event : timeline.events) {
    if (event.kind == EventKind::Allocate) open[event.address] = event.bytes;
    if (event.kind == EventKind::Free && open.count(event.address) == 1) {
      CHECK(open[event.address] == -event.bytes);
      open.erase(event.address);
    }
  }
  CHECK(open.count(address_of(during)) == 1);
}

TEST_CASE("Recorder writes the PyTorch snapshot and the Chrome trace, atomically, or says why not",
          "[memory_recorder]") {
  auto model = tiny_model();
  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::Tensor loss = mg::cross_entropy((*model)(mg::randn({8, 4})), mg::randint(0, 3, {8}, {.dtype = mg::DType::Int64}));
  loss.backward();
  recorder.stop();
  // What they hold is read back by Python: tests/memory/recording/check_memory_exports.py.
  const std::string pickle_path = temporary_path("snapshot.pickle");
  recorder.write_pytorch_snapshot(pickle_path);
  const std::string pickle = read_file(pickle_path);
  CHECK(pickle.substr(0, 2) == std::string("\x80\x02", 2));
  CHECK(pickle.back() == '.');
  CHECK(pickle.find("device_traces") != std::string::npos);
  const std::string trace_path = temporary_path("trace.json");
  recorder.write_chrome_trace(trace_path);
  // NOTE: its times are fractional microseconds, which io/json_parse does not read.
  CHECK(read_file(trace_path).rfind("{\"traceEvents\":[{", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(pickle_path + ".tmp"));
  std::filesystem::remove(pickle_path);
  std::filesystem::remove(trace_path);
  CHECK_THROWS_WITH(recorder.write_pytorch_snapshot("/nonexistent-folder/s.pickle"),
                    Catch::Contains("/nonexistent-folder/s.pickle.tmp") && Catch::Contains("Hint"));
  CHECK_THROWS_WITH(recorder.write_chrome_trace("/nonexistent-folder/t.json"),
                    Catch::Contains("write_chrome_trace") && Catch::Contains("Hint"));
}

TEST_CASE("frees and re-tags outside any op carry their block's labels, and GPT's loss names its modules",
          "[memory_recorder]") {
  mg::manual_seed(5);
  mg::nn::GPT model({.n_layer = 1, .n_head = 1, .n_embd = 8, .block_size = 8, .vocab_size = 16});
  mg::optim::AdamW optimizer(model.parameters());
  Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    const mg::Tensor tokens = mg::randint(0, 16, {2, 8});
    model.loss(tokens, tokens).backward();
    optimizer.step();
  }
  recorder.stop();
  const std::vector<MemoryEvent> events = recorder.timeline().events;
  // Paths as the parameters' names have them, the fused MLP (mg::mlp, since 2026-12-07) under
  // its module's path, and the fused head under its own name.
  CHECK(any_event(events, [](const MemoryEvent& e) { return e.module_path == "transformer.h.0.attn.c_attn"; }));
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Allocate && e.module_path == "transformer.h.0.mlp" && e.op == "mlp";
  }));
  CHECK(any_event(events, [](const MemoryEvent& e) {
    return e.kind == EventKind::Allocate && e.module_path == "lm_head" && e.op == "linear_cross_entropy";
  }));
  // zero_grad frees each gradient under its own name, in the module of the op that made it.
  bool zero_grad_freed = false;
  for (const MemoryEvent& e : events) {
    if (e.kind != EventKind::Free || e.op != "Optimizer.zero_grad") continue;
    zero_grad_freed = true;
    CHECK(e.category == MemoryCategory::Gradient);
    CHECK_FALSE(e.module_path.empty());
  }
  CHECK(zero_grad_freed);
  // AccumulateGrad's re-tags carry the module of the backward op that allocated the gradient.
  for (const MemoryEvent& e : events) {
    if (e.kind == EventKind::Retag && e.category == MemoryCategory::Gradient) CHECK_FALSE(e.module_path.empty());
  }
  CHECK(any_event(events, [](const MemoryEvent& e) { return e.op == "Optimizer.step"; }));
}
