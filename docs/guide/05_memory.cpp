// docs/guide/05_memory.cpp — where the bytes of a training step go: the memory report by
// category, the HTML timeline of every allocation, and the leak check (docs/guide.md,
// "Where the memory goes"). Fails (exit 1) unless the report's figures are the arithmetic
// of the model (weights, gradients, Adam's two moments), backward returned every
// activation, the timeline was written, training leaves nothing behind and a forward kept
// outside no_grad is caught.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <memgrad/memgrad.h>
#include <memgrad/memory/recorder.h>

#include "data.h"
#include "device.h"
#include "net.h"
#include "training.h"

int main() {
  mg::manual_seed(0);
  const mg::Device device = pick_device();
  Data data(device);
  auto model = std::make_shared<Net>();
  model->to(device);
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-3});
  mg::data::Batch batch;
  data.train_loader.next(batch);

  // [guide: report]
  mg::memory::reset_peak_stats(device);
  train_step(*model, optimizer, batch);
  std::cout << mg::memory::report(device);
  const mg::memory::Snapshot memory = mg::memory::snapshot(device);
  const int64_t weights = memory.category(mg::MemoryCategory::Parameter).current;
  const int64_t saved_at_peak = memory.category(mg::MemoryCategory::Activation).peak;
  // [guide: end]

  const int64_t parameter_bytes = model->num_parameters() * 4;  // float32
  const auto tensors = static_cast<int64_t>(model->parameters().size());
  const int64_t gradients = memory.category(mg::MemoryCategory::Gradient).current;
  const int64_t adam_state = memory.category(mg::MemoryCategory::OptimizerState).current;
  const int64_t saved_now = memory.category(mg::MemoryCategory::Activation).current;
  std::printf("%lld parameters in %lld tensors: %lld bytes; Adam: 2 moments + a 4-byte step counter per tensor "
              "= %lld bytes; activations: %lld bytes at the peak, %lld after backward\n",
              static_cast<long long>(model->num_parameters()), static_cast<long long>(tensors),
              static_cast<long long>(parameter_bytes), static_cast<long long>(2 * parameter_bytes + 4 * tensors),
              static_cast<long long>(saved_at_peak), static_cast<long long>(saved_now));
  bool ok = weights == parameter_bytes && gradients == parameter_bytes &&
            adam_state == 2 * parameter_bytes + 4 * tensors && saved_now == 0 && saved_at_peak > 0;

  // [guide: timeline]
  mg::memory::Recorder recorder({.device = device});
  recorder.start();
  for (int step = 0; step < 3; ++step) {
    data.train_loader.next(batch);
    train_step(*model, optimizer, batch);
    recorder.next_step();  // the chart marks step boundaries
  }
  recorder.stop();
  recorder.write_html("guide_timeline.html");  // one self-contained page: open it in a browser
  std::cout << mg::memory::live_tensor_report(recorder.leaked_tensors(1), "left behind by training step 1");
  // [guide: end]
  // NOTE: on a GPU the loader prefetches: the batches it prepared during step 1 for later
  // steps wait for their step, which the Recorder does not count as a leak.
  const bool training_leaks = !recorder.leaked_tensors(1).empty();
  const std::string page = "guide_timeline.html";
  const auto page_bytes = std::filesystem::exists(page) ? std::filesystem::file_size(page) : 0;
  std::printf("guide_timeline.html: %llu bytes, %zu events\n", static_cast<unsigned long long>(page_bytes),
              recorder.timeline().events.size());
  ok = ok && !training_leaks && page_bytes > 1000;

  // [guide: leak]
  std::vector<mg::Tensor> predictions;  // kept with the graph behind each: no NoGradGuard
  recorder.start();
  for (int step = 0; step < 3; ++step) {
    predictions.push_back((*model)(batch.inputs));
    recorder.next_step();
  }
  recorder.stop();
  std::cout << mg::memory::live_tensor_report(recorder.leaked_tensors(1), "left behind by evaluation step 1");
  // [guide: end]
  int64_t leaked_activations = 0;
  for (const mg::memory::LiveTensor& tensor : recorder.leaked_tensors(1)) {
    if (tensor.category == mg::MemoryCategory::Activation) leaked_activations += tensor.bytes;
  }
  ok = ok && leaked_activations > 0;

  if (!ok) {
    std::fprintf(stderr, "FAILED: expected PARAMETER and GRADIENT = %lld bytes (got %lld and %lld), "
                 "OPTIMIZER_STATE = %lld (got %lld), no ACTIVATION after backward (got %lld) but some at the "
                 "peak (got %lld), a timeline page (%llu bytes), nothing left by training (%s) and the kept "
                 "predictions' activations found (%lld bytes)\n",
                 static_cast<long long>(parameter_bytes), static_cast<long long>(weights),
                 static_cast<long long>(gradients), static_cast<long long>(2 * parameter_bytes + 4 * tensors),
                 static_cast<long long>(adam_state), static_cast<long long>(saved_now),
                 static_cast<long long>(saved_at_peak), static_cast<unsigned long long>(page_bytes),
                 training_leaks ? "it left some" : "right", static_cast<long long>(leaked_activations));
    return 1;
  }
  return 0;
}
