// tests/data/test_tensor_dataset.cpp — TensorDataset through the DataLoader: shuffled
// epochs equal a hand-written loop over random_permutation(seed + epoch), set_epoch(e)
// serves epoch e's order, drop_last, datasets of one and of three tensors, the error for
// tensors of different lengths, prefetching (the same batches, all tagged INPUT),
// make_data_loader, and a memory::Recorder that counts no prefetched batch as a leak.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/epoch_batches.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/data/dataloader.h"
#include "memgrad/data/permutation.h"
#include "memgrad/data/tensor_dataset.h"
#include "memgrad/memory/recorder.h"

using Catch::Matchers::Contains;
using mg::DType;
using mg_test::BatchValues;
using mg_test::epoch_batches;
using mg::MemoryCategory;
using mg::Tensor;
using mg::data::Batch;
using mg::data::DataLoader;
using mg::data::TensorDataset;

namespace {

constexpr int64_t kSamples = 10;
constexpr int64_t kFeatures = 3;

// Sample i: features 10 i + j (j < 3) and label 7 i, so a batch's values name its samples.
Tensor features() {
  std::vector<float> values;
  for (int64_t i = 0; i < kSamples; ++i) {
    for (int64_t j = 0; j < kFeatures; ++j) values.push_back(static_cast<float>(10 * i + j));
  }
  return mg::from_vector(values, {kSamples, kFeatures});
}
Tensor labels() {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < kSamples; ++i) values.push_back(7 * i);
  return mg::from_vector(values, {kSamples});
}

// What a hand-written loop over `order` in batches of `batch_size` gives.
std::vector<BatchValues> hand_written_epoch(const std::vector<int64_t>& order, int64_t batch_size, bool drop_last) {
  std::vector<BatchValues> batches;
  for (size_t first = 0; first < order.size(); first += static_cast<size_t>(batch_size)) {
    if (drop_last && first + static_cast<size_t>(batch_size) > order.size()) break;
    BatchValues batch;
    for (size_t k = first; k < order.size() && k < first + static_cast<size_t>(batch_size); ++k) {
      for (int64_t j = 0; j < kFeatures; ++j) batch.inputs.push_back(static_cast<float>(10 * order[k] + j));
      batch.targets.push_back(7 * order[k]);
    }
    batches.push_back(batch);
  }
  return batches;
}

// A dataset that only has get(): the default get_batch stacks its examples.
class Squares : public mg::data::Dataset {
 public:
  int64_t size() const override { return 6; }
  mg::data::Example get(int64_t index) const override {
    const auto x = static_cast<double>(index);
    return {mg::full({1}, x), mg::full({}, x * x, {.dtype = DType::Int64})};
  }
};

// Example i is (i), built slowly (as decoding a file would be); example `failing` throws.
class SlowNumbers : public mg::data::Dataset {
 public:
  explicit SlowNumbers(int64_t failing = -1) : failing_(failing) {}
  int64_t size() const override { return 24; }
  mg::data::Example get(int64_t index) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (index == failing_) throw mg::Error("example " + std::to_string(index) + " is unreadable");
    return {mg::full({1}, static_cast<double>(index))};
  }

 private:
  int64_t failing_;
};

int64_t input_bytes() { return mg::allocator_for(mg::Device::cpu()).stats().category(MemoryCategory::Input).current; }

}  // namespace

TEST_CASE("A TensorDataset loop over shuffled epochs equals a hand-written one", "[dataloader][tensor_dataset]") {
  const TensorDataset dataset({features(), labels()});
  CHECK(dataset.size() == kSamples);
  for (const bool drop_last : {false, true}) {
    INFO("drop_last " << drop_last);
    DataLoader loader(dataset, {.batch_size = 4, .shuffle = true, .seed = 11, .drop_last = drop_last});
    CHECK(loader.num_batches() == (drop_last ? 2 : 3));
    for (int64_t epoch = 0; epoch < 4; ++epoch) {
      const std::vector<BatchValues> expected =
          hand_written_epoch(mg::data::random_permutation(kSamples, 11 + static_cast<uint64_t>(epoch)), 4, drop_last);
      CHECK(epoch_batches(loader) == expected);
      CHECK(loader.epoch() == epoch);
    }
  }
  // Unshuffled: 0, 1, ..., with the last batch partial.
  DataLoader in_order(dataset, {.batch_size = 4});
  CHECK(epoch_batches(in_order) == hand_written_epoch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, false));
}

TEST_CASE("set_epoch(e) serves the order of the e-th epoch", "[dataloader][tensor_dataset]") {
  const TensorDataset dataset({features(), labels()});
  DataLoader straight(dataset, {.batch_size = 3, .shuffle = true, .seed = 4});
  std::vector<std::vector<BatchValues>> epochs;
  for (int epoch = 0; epoch < 5; ++epoch) epochs.push_back(epoch_batches(straight));

  DataLoader resumed(dataset, {.batch_size = 3, .shuffle = true, .seed = 4});
  resumed.set_epoch(3);
  CHECK(resumed.epoch() == 3);
  CHECK(resumed.num_batches() == 4);
  CHECK(epoch_batches(resumed) == epochs[3]);  // the first loop after set_epoch serves epoch 3
  CHECK(epoch_batches(resumed) == epochs[4]);  // then on as usual

  SECTION("mid-epoch, set_epoch starts the epoch from its first batch") {
    Batch batch;
    resumed.reset();
    REQUIRE(resumed.next(batch));
    resumed.set_epoch(1);
    CHECK(epoch_batches(resumed) == epochs[1]);
  }
  SECTION("with prefetching, mid-epoch too") {
    DataLoader prefetching(dataset, {.batch_size = 3, .shuffle = true, .seed = 4, .prefetch = 2});
    Batch batch;
    REQUIRE(prefetching.next(batch));
    prefetching.set_epoch(2);
    CHECK(epoch_batches(prefetching) == epochs[2]);
  }
  CHECK_THROWS_WITH(resumed.set_epoch(-1), Contains("epochs count from 0, got -1"));
}

TEST_CASE("TensorDatasets of one and of three tensors batch each of them", "[dataloader][tensor_dataset]") {
  SECTION("one tensor: inputs only") {
    const TensorDataset dataset({features()});
    DataLoader loader(dataset, {.batch_size = 4});
    Batch batch;
    REQUIRE(loader.next(batch));
    CHECK(batch.num_tensors() == 1);
    CHECK(batch.size() == 4);
    CHECK(batch.inputs.sizes() == mg::Shape{4, kFeatures});
    CHECK_FALSE(batch.targets.defined());
    CHECK(batch.inputs.to_vector<float>()[kFeatures] == 10.0f);  // sample 1, feature 0
    CHECK_THROWS_WITH(batch[1], Contains("tensor 1 asked of a batch of 1 tensors"));
  }
  SECTION("three tensors of three dtypes: the third in rest") {
    // (N, 2, 2) float64 weights beside the features and labels.
    std::vector<double> weights;
    for (int64_t i = 0; i < kSamples * 4; ++i) weights.push_back(0.5 * static_cast<double>(i));
    const TensorDataset dataset({features(), labels(), mg::from_vector(weights, {kSamples, 2, 2})});
    CHECK(dataset.get(2).size() == 3);
    CHECK(dataset.get(2)[2].sizes() == mg::Shape{2, 2});
    DataLoader loader(dataset, {.batch_size = 3, .shuffle = true, .seed = 2});
    const std::vector<int64_t> order = mg::data::random_permutation(kSamples, 2);
    int64_t first = 0;
    for (const Batch& batch : loader) {
      REQUIRE(batch.num_tensors() == 3);
      CHECK(batch.rest.size() == 1);
      CHECK(batch[2].dtype() == DType::Float64);
      CHECK(batch[2].sizes() == mg::Shape{batch.size(), 2, 2});
      const std::vector<double> values = batch[2].to_vector<double>();
      const std::vector<int64_t> targets = batch[1].to_vector<int64_t>();
      for (int64_t row = 0; row < batch.size(); ++row) {
        const int64_t sample = order[static_cast<size_t>(first + row)];
        CHECK(targets[static_cast<size_t>(row)] == 7 * sample);
        for (int64_t k = 0; k < 4; ++k) CHECK(values[static_cast<size_t>(row * 4 + k)] == 0.5 * (sample * 4 + k));
      }
      first += batch.size();
    }
    CHECK(first == kSamples);
  }
}

TEST_CASE("TensorDataset refuses tensors that do not share their first dimension", "[dataloader][tensor_dataset]") {
  CHECK_THROWS_WITH(TensorDataset({features(), mg::zeros({9}, {.dtype = DType::Int64})}),
                    Contains("must share their first dimension (one row per example), but their shapes are "
                             "[10, 3] float32, [9] int64"));
  CHECK_THROWS_WITH(TensorDataset(std::vector<Tensor>{}), Contains("TensorDataset: no tensors"));
  CHECK_THROWS_WITH(TensorDataset({features(), mg::scalar_tensor(1.0)}), Contains("tensor 1 is a scalar"));
  CHECK_THROWS_WITH(TensorDataset({Tensor(), features()}), Contains("tensor 0 is undefined"));
}

TEST_CASE("Prefetching serves a TensorDataset's batches unchanged, every tensor tagged INPUT",
          "[dataloader][tensor_dataset][prefetch]") {
  const Tensor inputs = features(), targets = labels();
  const TensorDataset dataset({inputs, targets});
  CHECK(inputs.memory_category() == MemoryCategory::Input);  // the dataset's bytes are input memory
  for (int prefetch : {0, 1, 3}) {
    INFO("prefetch " << prefetch);
    DataLoader plain(dataset, {.batch_size = 3, .shuffle = true, .seed = 9});
    DataLoader prefetching(dataset, {.batch_size = 3, .shuffle = true, .seed = 9, .prefetch = prefetch});
    for (int epoch = 0; epoch < 3; ++epoch) {
      const std::vector<BatchValues> expected = epoch_batches(plain);
      std::vector<BatchValues> got;
      for (const Batch& batch : prefetching) {
        CHECK(batch.inputs.memory_category() == MemoryCategory::Input);
        CHECK(batch.targets.memory_category() == MemoryCategory::Input);
        got.push_back({batch.inputs.to_vector<float>(), batch.targets.to_vector<int64_t>()});
      }
      CHECK(got == expected);
    }
  }
}

TEST_CASE("make_data_loader owns its dataset, and a dataset with get() alone is stacked", "[dataloader][tensor_dataset]") {
  std::unique_ptr<DataLoader> loader = mg::data::make_data_loader(Squares(), {.batch_size = 4});
  std::vector<BatchValues> batches = epoch_batches(*loader);
  REQUIRE(batches.size() == 2);
  CHECK(batches[0] == BatchValues{{0, 1, 2, 3}, {0, 1, 4, 9}});
  CHECK(batches[1] == BatchValues{{4, 5}, {16, 25}});
  Batch batch;
  loader->reset();
  REQUIRE(loader->next(batch));
  CHECK(batch.inputs.sizes() == mg::Shape{4, 1});
  CHECK(batch.targets.sizes() == mg::Shape{4});
  CHECK(batch.inputs.memory_category() == MemoryCategory::Input);

  auto shared = std::make_shared<TensorDataset>(std::vector<Tensor>{features(), labels()});
  DataLoader sharing(shared, {.batch_size = 5});
  shared.reset();  // the loader keeps it alive
  CHECK(epoch_batches(sharing) == hand_written_epoch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 5, false));
}

TEST_CASE("A Recorder around a prefetching loop counts no batch of the loader as a leak", "[dataloader][prefetch]") {
  std::vector<float> values(64 * 8, 1.0f);
  const TensorDataset dataset({mg::from_vector(values, {64, 8}), mg::zeros({64}, {.dtype = DType::Int64})});
  const int64_t before = input_bytes();
  const int64_t batch_bytes = 4 * 8 * 4 + 4 * 8;
  mg::memory::Recorder recorder({.device = mg::Device::cpu()});
  {
    DataLoader loader(dataset, {.batch_size = 4, .shuffle = true, .seed = 1, .prefetch = 2});
    recorder.start();
    Batch kept;
    int64_t step = 0;
    for (const Batch& batch : loader) {
      const Tensor total = batch.inputs.sum();  // the step's own temporary
      CHECK(total.item<float>() == 32.0f);
      if (step == 2) kept = batch;  // a batch kept past its step: that step's leak
      // Let the background thread fill its queue (the batch in hand plus 2 ahead, and the
      // kept one), so that batches allocated during the step just ended wait there.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      const int64_t expected = (step >= 3 ? 4 : 3) * batch_bytes;
      while (input_bytes() - before < expected && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      recorder.next_step();
      ++step;
      if (step >= 2) {
        INFO("step " << step - 1);
        // Held ahead: batches allocated by the loader's thread that no step took yet.
        const std::vector<mg::memory::LiveTensor> live = recorder.live_tensors();
        CHECK(std::any_of(live.begin(), live.end(), [](const auto& tensor) { return tensor.prepared_ahead; }));
        // The step that just ended left nothing behind but the batch it was served, which the
        // loop holds until the next one.
        const std::vector<mg::memory::LiveTensor> leaked = recorder.leaked_tensors(step - 2);
        INFO(mg::memory::live_tensor_report(leaked, "left behind"));
        if (step - 2 == 2) {
          CHECK(leaked.size() == 2);  // the kept batch's inputs and targets
          for (const auto& tensor : leaked) CHECK(tensor.category == MemoryCategory::Input);
        } else {
          CHECK(leaked.empty());
        }
      }
      if (step == 8) break;
    }
    recorder.stop();
  }
  CHECK(input_bytes() == before);
}

TEST_CASE("Several workers build batches at once and serve them in order, errors after the batches before",
          "[dataloader][prefetch]") {
  const SlowNumbers dataset;
  auto epoch_values = [](DataLoader& loader) {
    std::vector<float> values;
    for (const Batch& batch : loader) {
      const std::vector<float> rows = batch.inputs.to_vector<float>();
      values.insert(values.end(), rows.begin(), rows.end());
    }
    return values;
  };
  auto seconds_for_an_epoch = [&](int workers) {
    DataLoader loader(dataset, {.batch_size = 2, .shuffle = true, .seed = 4, .prefetch = 4, .workers = workers});
    const auto start = std::chrono::steady_clock::now();
    const std::vector<float> values = epoch_values(loader);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    DataLoader plain(dataset, {.batch_size = 2, .shuffle = true, .seed = 4});
    CHECK(values == epoch_values(plain));  // the same batches, in the same order
    return seconds;
  };
  // 12 batches of two 5 ms examples: about 120 ms on one worker; four sleep side by side.
  const double one = seconds_for_an_epoch(1), four = seconds_for_an_epoch(4);
  INFO("one worker " << one << " s, four " << four << " s");
  CHECK(four < 0.6 * one);

  const SlowNumbers failing(/*failing=*/9);  // in batch 4 of batch size 2
  DataLoader loader(failing, {.batch_size = 2, .prefetch = 6, .workers = 3});
  Batch batch;
  for (int b = 0; b < 4; ++b) {
    REQUIRE(loader.next(batch));
    CHECK(batch.inputs.to_vector<float>() == std::vector<float>{2.0f * b, 2.0f * b + 1});
  }
  CHECK_THROWS_WITH(loader.next(batch), Contains("example 9 is unreadable"));
  CHECK_THROWS_WITH(loader.next(batch), Contains("example 9 is unreadable"));  // until reset()
  CHECK_THROWS_WITH(DataLoader(dataset, {.prefetch = 1, .workers = 0}), Contains("workers must be 1 or more"));
}
