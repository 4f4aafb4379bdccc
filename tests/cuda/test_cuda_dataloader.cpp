// tests/cuda/test_cuda_dataloader.cpp — a DataLoader serving a TensorDataset to the GPU:
// batches gathered in pinned memory, copied without blocking and prefetched two ahead are
// the CPU loader's batches, INPUT memory on the device; and a memory::Recorder of the
// device counts none of the prefetched batches as a step's leak, but a batch kept past
// its step as that step's.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/data/dataloader.h"
#include "memgrad/data/tensor_dataset.h"
#include "memgrad/memory/recorder.h"

using namespace mg;
using mg::data::Batch;
using mg::data::DataLoader;
using mg::data::TensorDataset;

namespace {

TensorDataset random_dataset(int64_t samples) {
  Generator generator(3);
  return TensorDataset({randn({samples, 5}, {}, &generator),
                        randint(0, 10, {samples}, {.dtype = DType::Int64}, &generator)});
}

}  // namespace

TEST_CASE("A DataLoader serves a TensorDataset to the GPU from pinned memory, prefetched", "[cuda][dataloader]") {
  const TensorDataset dataset = random_dataset(100);
  DataLoader on_cpu(dataset, {.batch_size = 8, .shuffle = true, .seed = 2});
  DataLoader on_gpu(dataset, {.batch_size = 8, .shuffle = true, .seed = 2, .device = Device::cuda(),
                              .pin_memory = true, .prefetch = 2});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<Batch> expected;
    for (const Batch& batch : on_cpu) expected.push_back(batch);
    size_t served = 0;
    for (const Batch& batch : on_gpu) {
      REQUIRE(served < expected.size());
      for (size_t i = 0; i < 2; ++i) {
        CHECK(batch[i].device() == Device::cuda());
        CHECK(batch[i].memory_category() == MemoryCategory::Input);
      }
      CHECK(batch.inputs.to(Device::cpu()).to_vector<float>() == expected[served].inputs.to_vector<float>());
      CHECK(batch.targets.to(Device::cpu()).to_vector<int64_t>() == expected[served].targets.to_vector<int64_t>());
      ++served;
    }
    CHECK(served == expected.size());  // 13: the last of 4 samples
  }
}

TEST_CASE("A Recorder of the GPU counts no prefetched batch as a leak", "[cuda][dataloader]") {
  const TensorDataset dataset = random_dataset(64);
  memory::Recorder recorder({.device = Device::cuda()});
  DataLoader loader(dataset, {.batch_size = 4, .device = Device::cuda(), .pin_memory = true, .prefetch = 2});
  recorder.start();
  Batch kept;
  int64_t step = 0;
  for (const Batch& batch : loader) {
    if (step == 2) kept = batch;  // a batch kept past its step: that step's leak
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the queue fills meanwhile
    recorder.next_step();
    ++step;
    if (step >= 2) {
      const std::vector<memory::LiveTensor> leaked = recorder.leaked_tensors(step - 2);
      INFO("step " << step - 2 << ": " << memory::live_tensor_report(leaked, "left behind"));
      CHECK(leaked.size() == (step - 2 == 2 ? 2u : 0u));  // the kept batch's two tensors
    }
    if (step == 8) break;
  }
  recorder.stop();
}
