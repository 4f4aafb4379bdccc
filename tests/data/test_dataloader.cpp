// tests/data/test_dataloader.cpp — MnistDataset and DataLoader on a tiny IDX dataset with
// known pixels: batch shapes and values, the last partial batch and drop_last, shuffling
// (a permutation, reproducible from the seed, new each epoch), the exact INPUT bytes a
// batch holds, the errors for image and label files that do not belong together and for a
// label outside the classes, and prefetching (the same batches in the same order, bounded
// memory, clean stops, errors passed on).
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/epoch_batches.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/data/dataloader.h"
#include "memgrad/data/mnist_dataset.h"
#include "data/mnist_test_files.h"

using mg::DType;
using mg_test::BatchValues;
using mg_test::epoch_batches;
using mg::MemoryCategory;
using mg::data::Batch;
using mg::data::DataLoader;
using mg::data::DataLoaderOptions;
using mg::data::MnistDataset;
using mg::data::Normalization;
using mg::data::Split;
using mg_test::TempDir;

namespace {

constexpr int64_t kImages = 10;
constexpr uint32_t kRows = 2, kCols = 3;  // not square, so rows and cols cannot be swapped
constexpr int64_t kPixels = kRows * kCols;

// Pixel p of image i; every image differs, so a batch's values tell which image it holds.
uint8_t pixel_value(int64_t image, int64_t pixel) { return static_cast<uint8_t>(25 * image + pixel); }

// Image i has label i, so targets name the images a batch holds.
void write_tiny_dataset(const TempDir& dir) {
  std::vector<uint8_t> pixels, labels;
  for (int64_t image = 0; image < kImages; ++image) {
    for (int64_t pixel = 0; pixel < kPixels; ++pixel) pixels.push_back(pixel_value(image, pixel));
    labels.push_back(static_cast<uint8_t>(image));
  }
  mg_test::write_mnist_split(dir, "train", kRows, kCols, pixels, labels);
}

// The targets of every batch of one epoch, in order.
std::vector<int64_t> epoch_targets(DataLoader& loader) {
  std::vector<int64_t> targets;
  for (const Batch& batch : loader) {
    for (int64_t target : batch.targets.to_vector<int64_t>()) targets.push_back(target);
  }
  return targets;
}

int64_t input_bytes() {
  return mg::allocator_for(mg::Device::cpu()).stats().category(MemoryCategory::Input).current;
}

std::vector<int64_t> sorted(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

}  // namespace

TEST_CASE("MnistDataset keeps uint8 images and int64 labels, and their pixel statistics",
          "[dataloader]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);

  CHECK(dataset.size() == kImages);
  CHECK(dataset.image_shape() == mg::Shape{kRows, kCols});
  CHECK(dataset.num_classes() == 10);  // MNIST's, by default
  CHECK(dataset.images().dtype() == DType::UInt8);
  CHECK(dataset.images().sizes() == mg::Shape{kImages, kRows, kCols});
  CHECK(dataset.images().memory_category() == MemoryCategory::Input);
  CHECK(dataset.labels().dtype() == DType::Int64);
  CHECK(dataset.labels().to_vector<int64_t>()[7] == 7);
  CHECK(dataset.images().data_ptr<uint8_t>()[3 * kPixels + 4] == pixel_value(3, 4));

  double sum = 0, sum_of_squares = 0;
  for (int64_t image = 0; image < kImages; ++image) {
    for (int64_t pixel = 0; pixel < kPixels; ++pixel) {
      const double value = pixel_value(image, pixel) / 255.0;
      sum += value;
      sum_of_squares += value * value;
    }
  }
  const double mean = sum / (kImages * kPixels);
  const double std = std::sqrt(sum_of_squares / (kImages * kPixels) - mean * mean);
  CHECK(dataset.normalization().mean == Approx(mean).epsilon(1e-12));
  CHECK(dataset.normalization().std == Approx(std).epsilon(1e-12));
}

TEST_CASE("DataLoader batches in order, normalised, with a last partial batch",
          "[dataloader]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  const Normalization normalization{0.25, 0.5};
  MnistDataset dataset(dir.path.string(), Split::Train, {.normalization = normalization});
  DataLoader loader(dataset, {.batch_size = 4});
  CHECK(loader.num_batches() == 3);

  std::vector<int64_t> batch_sizes;
  int64_t first_image = 0;
  for (const Batch& batch : loader) {
    const int64_t size = batch.targets.size(0);
    batch_sizes.push_back(size);
    CHECK(batch.inputs.sizes() == mg::Shape{size, 1, kRows, kCols});
    CHECK(batch.inputs.dtype() == DType::Float32);
    CHECK(batch.targets.dtype() == DType::Int64);
    const std::vector<float> inputs = batch.inputs.to_vector<float>();
    const std::vector<int64_t> targets = batch.targets.to_vector<int64_t>();
    for (int64_t row = 0; row < size; ++row) {
      CHECK(targets[row] == first_image + row);
      for (int64_t pixel = 0; pixel < kPixels; ++pixel) {
        const double expected = (pixel_value(first_image + row, pixel) / 255.0 - 0.25) / 0.5;
        CHECK(inputs[row * kPixels + pixel] == Approx(expected).epsilon(1e-6));
      }
    }
    first_image += size;
  }
  CHECK(batch_sizes == std::vector<int64_t>{4, 4, 2});

  SECTION("drop_last leaves out the partial batch") {
    DataLoader dropping(dataset, {.batch_size = 4, .drop_last = true});
    CHECK(dropping.num_batches() == 2);
    CHECK(epoch_targets(dropping) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  }
  SECTION("flatten gives (B, H*W) with the same values") {
    MnistDataset flat_set(dir.path.string(), Split::Train, {.normalization = normalization, .flatten = true});
    DataLoader flat(flat_set, {.batch_size = 4});
    Batch batch;
    REQUIRE(flat.next(batch));
    CHECK(batch.inputs.sizes() == mg::Shape{4, kPixels});
    CHECK(batch.inputs.to_vector<float>()[kPixels + 2] ==
          Approx((pixel_value(1, 2) / 255.0 - 0.25) / 0.5).epsilon(1e-6));
  }
  SECTION("next() ends the epoch and reset() starts the next one") {
    DataLoader manual(dataset, {.batch_size = 6});
    Batch batch;
    CHECK(manual.next(batch));
    CHECK(manual.next(batch));
    CHECK(batch.targets.size(0) == 4);
    CHECK_FALSE(manual.next(batch));
    CHECK_FALSE(batch.inputs.defined());
    manual.reset();
    CHECK(manual.epoch() == 1);
    CHECK(manual.next(batch));
    CHECK(batch.targets.size(0) == 6);
  }
}

TEST_CASE("DataLoader shuffles each epoch into a new permutation, reproducibly",
          "[dataloader]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);
  std::vector<int64_t> identity(kImages);
  std::iota(identity.begin(), identity.end(), int64_t{0});

  DataLoader loader(dataset, {.batch_size = 3, .shuffle = true, .seed = 42});
  const std::vector<int64_t> epoch0 = epoch_targets(loader);
  CHECK(loader.epoch() == 0);
  const std::vector<int64_t> epoch1 = epoch_targets(loader);
  CHECK(loader.epoch() == 1);
  CHECK(sorted(epoch0) == identity);
  CHECK(sorted(epoch1) == identity);
  CHECK(epoch0 != identity);
  CHECK(epoch1 != epoch0);

  DataLoader same_seed(dataset, {.batch_size = 5, .shuffle = true, .seed = 42});
  CHECK(epoch_targets(same_seed) == epoch0);  // the order does not depend on batch_size
  CHECK(epoch_targets(same_seed) == epoch1);

  DataLoader other_seed(dataset, {.batch_size = 3, .shuffle = true, .seed = 7});
  CHECK(epoch_targets(other_seed) != epoch0);

  DataLoader unshuffled(dataset, {.batch_size = 3});
  CHECK(epoch_targets(unshuffled) == identity);
  CHECK(epoch_targets(unshuffled) == identity);
}

TEST_CASE("A batch holds exactly its own bytes of INPUT memory while it lives",
          "[dataloader]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);
  DataLoader loader(dataset, {.batch_size = 4});
  auto input_bytes = [] {
    return mg::allocator_for(mg::Device::cpu()).stats().category(MemoryCategory::Input).current;
  };

  const int64_t before = input_bytes();
  {
    Batch batch;
    REQUIRE(loader.next(batch));
    CHECK(batch.inputs.memory_category() == MemoryCategory::Input);
    CHECK(batch.targets.memory_category() == MemoryCategory::Input);
    const int64_t batch_bytes = 4 * kPixels * sizeof(float) + 4 * sizeof(int64_t);
    CHECK(input_bytes() - before == batch_bytes);
    REQUIRE(loader.next(batch));  // the previous batch is released before the next is built
    CHECK(input_bytes() - before == batch_bytes);
  }
  CHECK(input_bytes() == before);
}

TEST_CASE("MnistDataset refuses image and label files of different lengths", "[dataloader]") {
  TempDir dir("dataloader");
  mg_test::write_ubyte_idx(dir.file("t10k-images-idx3-ubyte"), {3, kRows, kCols},
                           std::vector<uint8_t>(3 * kPixels, 1));
  mg_test::write_ubyte_idx(dir.file("t10k-labels-idx1-ubyte"), {2}, {0, 1});
  try {
    MnistDataset dataset(dir.path.string(), Split::Test);
    FAIL("no error for 3 images with 2 labels");
  } catch (const mg::Error& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains(dir.file("t10k-images-idx3-ubyte")));
    CHECK_THAT(message, Catch::Contains(dir.file("t10k-labels-idx1-ubyte")));
    CHECK_THAT(message, Catch::Contains("3 images"));
    CHECK_THAT(message, Catch::Contains("2 labels"));
  }
}

TEST_CASE("MnistDataset refuses a label outside its classes, naming the file, the sample and the label",
          "[dataloader]") {
  TempDir dir("dataloader");
  std::vector<uint8_t> labels = {3, 1, 4, 1, 5, 200, 2};
  std::vector<uint8_t> pixels;
  for (size_t image = 0; image < labels.size(); ++image) {
    for (int64_t pixel = 0; pixel < kPixels; ++pixel) pixels.push_back(pixel_value(static_cast<int64_t>(image), pixel));
  }
  mg_test::write_mnist_split(dir, "train", kRows, kCols, pixels, labels);
  const std::string labels_file = dir.file("train-labels-idx1-ubyte");
  CHECK_THROWS_WITH(MnistDataset(dir.path.string(), Split::Train),
                    Catch::Contains("'" + labels_file + "' gives sample 5 the label 200, outside the 10 classes [0, 10)"));
  // Another class count moves the bound both ways.
  CHECK(MnistDataset(dir.path.string(), Split::Train, {.num_classes = 201}).num_classes() == 201);
  CHECK_THROWS_WITH(MnistDataset(dir.path.string(), Split::Train, {.num_classes = 5}),
                    Catch::Contains("gives sample 4 the label 5, outside the 5 classes"));
  CHECK_THROWS_WITH(MnistDataset(dir.path.string(), Split::Train, {.num_classes = 0}),
                    Catch::Contains("num_classes must be positive"));
}

TEST_CASE("MnistDataset's examples are the rows of its batches", "[dataloader]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  for (const bool flatten : {false, true}) {
    const MnistDataset dataset(dir.path.string(), Split::Train, {.flatten = flatten});
    const mg::Shape image_shape = flatten ? mg::Shape{kPixels} : mg::Shape{1, kRows, kCols};
    CHECK(dataset.sample_shape() == image_shape);
    const std::vector<int64_t> indices = {7, 2, 7};
    const std::vector<mg::Tensor> batch = dataset.get_batch(indices, /*pin_memory=*/false);
    REQUIRE(batch.size() == 2);
    const std::vector<float> pixels = batch[0].to_vector<float>();
    for (size_t row = 0; row < indices.size(); ++row) {
      const mg::data::Example example = dataset.get(indices[row]);
      REQUIRE(example.size() == 2);
      CHECK(example[0].sizes() == image_shape);
      CHECK(example[1].dim() == 0);
      CHECK(example[1].item<int64_t>() == indices[row]);
      const std::vector<float> image = example[0].to_vector<float>();
      CHECK(std::vector<float>(pixels.begin() + row * kPixels, pixels.begin() + (row + 1) * kPixels) == image);
    }
    CHECK(batch[1].to_vector<int64_t>() == indices);
  }
}

TEST_CASE("Prefetching serves the same batches in the same order as building on demand",
          "[dataloader][prefetch]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);

  const std::vector<DataLoaderOptions> settings = {
      {.batch_size = 3, .shuffle = true, .seed = 42},                 // a partial last batch
      {.batch_size = 4, .shuffle = true, .seed = 7, .drop_last = true},
      {.batch_size = 1},
      {.batch_size = 64},                                             // one batch per epoch
  };
  for (const DataLoaderOptions& options : settings) {
    for (const auto [prefetch, workers] : {std::pair{1, 1}, {2, 1}, {5, 1}, {2, 2}, {5, 3}, {1, 4}}) {
      INFO("batch_size " << options.batch_size << ", prefetch " << prefetch << ", workers " << workers);
      DataLoader plain(dataset, options);
      DataLoaderOptions prefetching_options = options;
      prefetching_options.prefetch = prefetch;
      prefetching_options.workers = workers;
      DataLoader prefetching(dataset, prefetching_options);
      for (int epoch = 0; epoch < 3; ++epoch) {
        const std::vector<BatchValues> expected = epoch_batches(plain);
        REQUIRE(static_cast<int64_t>(expected.size()) == plain.num_batches());
        CHECK(epoch_batches(prefetching) == expected);
        CHECK(prefetching.epoch() == plain.epoch());
      }
    }
  }

  SECTION("with next() and reset() called by hand, mid-epoch too") {
    DataLoader plain(dataset, {.batch_size = 3, .shuffle = true, .seed = 3});
    DataLoader prefetching(dataset, {.batch_size = 3, .shuffle = true, .seed = 3, .prefetch = 2});
    Batch expected, got;
    REQUIRE(plain.next(expected));
    REQUIRE(prefetching.next(got));
    CHECK(got.targets.to_vector<int64_t>() == expected.targets.to_vector<int64_t>());
    plain.reset();  // leaves epoch 0 after one batch
    prefetching.reset();
    CHECK(prefetching.epoch() == 1);
    int64_t batches = 0;
    while (plain.next(expected)) {
      REQUIRE(prefetching.next(got));
      CHECK(got.inputs.to_vector<float>() == expected.inputs.to_vector<float>());
      CHECK(got.targets.to_vector<int64_t>() == expected.targets.to_vector<int64_t>());
      ++batches;
    }
    CHECK(batches == 4);
    CHECK_FALSE(prefetching.next(got));
    CHECK_FALSE(got.inputs.defined());
    CHECK_FALSE(prefetching.next(got));  // still over, until reset()
  }
}

TEST_CASE("A prefetching loader holds at most prefetch batches ahead and frees them all",
          "[dataloader][prefetch]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);
  const int64_t batch_bytes = 2 * kPixels * sizeof(float) + 2 * sizeof(int64_t);
  const int64_t before = input_bytes();

  {
    DataLoader loader(dataset, {.batch_size = 2, .prefetch = 2});
    CHECK(input_bytes() == before);  // nothing is prepared before the first next()
    Batch batch;
    REQUIRE(loader.next(batch));
    // The worker fills the queue in the background: wait (bounded) until it has, then
    // check that it stops there: the batch in hand plus 2 ahead.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (input_bytes() - before < 3 * batch_bytes && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(input_bytes() - before == 3 * batch_bytes);
  }  // destroyed mid-epoch, with the worker waiting for room
  CHECK(input_bytes() == before);

  SECTION("destroyed before the first batch, or after the epoch ended") {
    { DataLoader idle(dataset, {.batch_size = 2, .prefetch = 3}); }
    {
      DataLoader finished(dataset, {.batch_size = 2, .prefetch = 3});
      CHECK(epoch_targets(finished).size() == kImages);
    }
    CHECK(input_bytes() == before);
  }
  SECTION("destroyed at once, many times over (no hang, no leak)") {
    for (int i = 0; i < 200; ++i) {
      DataLoader loader(dataset,
                        {.batch_size = 1, .shuffle = true, .seed = 5, .prefetch = 1 + i % 4, .workers = 1 + i % 3});
      Batch batch;
      for (int j = 0; j < i % 5; ++j) REQUIRE(loader.next(batch));
    }
    CHECK(input_bytes() == before);
  }
  SECTION("a new epoch started mid-epoch drops the prepared batches") {
    DataLoader loader(dataset, {.batch_size = 2, .prefetch = 4});
    Batch batch;
    REQUIRE(loader.next(batch));
    batch = Batch{};
    loader.reset();
    CHECK(input_bytes() == before);
    CHECK(epoch_targets(loader) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
}

TEST_CASE("An error met by the prefetching thread is thrown by next()", "[dataloader][prefetch]") {
  TempDir dir("dataloader");
  write_tiny_dataset(dir);
  MnistDataset dataset(dir.path.string(), Split::Train);
  // A device that cannot exist (indices stop at 63): copying a batch there fails.
  const mg::Device missing = mg::Device::cuda(64);

  std::string expected_message;
  DataLoader plain(dataset, {.batch_size = 4, .device = missing});
  Batch batch;
  try {
    plain.next(batch);
    FAIL("no error for a batch sent to " << missing);
  } catch (const mg::Error& error) {
    expected_message = error.what();
  }

  DataLoader prefetching(dataset, {.batch_size = 4, .device = missing, .prefetch = 2});
  for (int call = 0; call < 2; ++call) {  // the same error again until reset()
    try {
      prefetching.next(batch);
      FAIL("no error from the prefetching thread");
    } catch (const mg::Error& error) {
      CHECK(std::string(error.what()) == expected_message);
    }
  }
  prefetching.reset();
  CHECK_THROWS_AS(prefetching.next(batch), mg::Error);
}
