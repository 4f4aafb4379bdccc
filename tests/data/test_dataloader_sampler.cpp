// tests/data/test_dataloader_sampler.cpp — a DataLoader whose samples a sampler chooses
// (DataLoaderOptions::sampler): each epoch serves exactly the sampler's indices for that
// epoch, in order, the sampler is called only for the epochs served, and indices outside
// the dataset or a second shuffle are refused.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/data/dataloader.h"
#include "memgrad/data/mnist_dataset.h"
#include "memgrad/data/permutation.h"
#include "data/mnist_test_files.h"

using mg::data::Batch;
using mg::data::DataLoader;
using mg::data::MnistDataset;
using mg::data::Split;
using mg_test::TempDir;

namespace {

constexpr int64_t kImages = 7;

// Image i has label i, so a batch's targets name the images it holds.
MnistDataset tiny_dataset(const TempDir& dir) {
  std::vector<uint8_t> pixels, labels;
  for (int64_t image = 0; image < kImages; ++image) {
    pixels.push_back(static_cast<uint8_t>(30 * image));
    labels.push_back(static_cast<uint8_t>(image));
  }
  mg_test::write_mnist_split(dir, "train", 1, 1, pixels, labels);
  return MnistDataset(dir.path.string(), Split::Train);
}

std::vector<int64_t> epoch_targets(DataLoader& loader) {
  std::vector<int64_t> targets;
  for (const Batch& batch : loader) {
    for (int64_t target : batch.targets.to_vector<int64_t>()) targets.push_back(target);
  }
  return targets;
}

}  // namespace

TEST_CASE("A DataLoader with a sampler serves the sampler's indices of each epoch",
          "[dataloader][sampler]") {
  TempDir dir("dataloader-sampler");
  const MnistDataset dataset = tiny_dataset(dir);
  std::vector<int64_t> epochs_asked;
  // A shard with a repeated index, different each epoch, as a distributed sampler's.
  auto sampler = [&](int64_t epoch) {
    epochs_asked.push_back(epoch);
    return epoch == 0 ? std::vector<int64_t>{6, 0, 3, 6} : std::vector<int64_t>{1, 2, 5};
  };
  DataLoader loader(dataset, {.batch_size = 3, .sampler = sampler});
  CHECK(loader.num_batches() == 2);
  CHECK(epoch_targets(loader) == std::vector<int64_t>{6, 0, 3, 6});
  CHECK(epoch_targets(loader) == std::vector<int64_t>{1, 2, 5});
  CHECK(loader.num_batches() == 1);
  CHECK(epochs_asked == std::vector<int64_t>{0, 1});

  // set_epoch asks for no epoch until it is served: a sampler drawing from a generator
  // draws only for the epochs a resumed run serves.
  loader.set_epoch(5);
  loader.set_epoch(1);
  CHECK(epochs_asked == std::vector<int64_t>{0, 1});
  CHECK(epoch_targets(loader) == std::vector<int64_t>{1, 2, 5});
  CHECK(epochs_asked == std::vector<int64_t>{0, 1, 1});

  // The loader's own shuffle is the same permutation a sampler gets from random_permutation.
  DataLoader shuffled(dataset, {.batch_size = 2, .shuffle = true, .seed = 5});
  CHECK(epoch_targets(shuffled) == mg::data::random_permutation(kImages, 5));
  CHECK(epoch_targets(shuffled) == mg::data::random_permutation(kImages, 6));
}

TEST_CASE("A DataLoader refuses a sampler's index outside the dataset, and shuffle with a sampler",
          "[dataloader][sampler]") {
  using Catch::Matchers::Contains;
  TempDir dir("dataloader-sampler");
  const MnistDataset dataset = tiny_dataset(dir);
  DataLoader outside(dataset, {.sampler = [](int64_t) { return std::vector<int64_t>{0, 7}; }});
  CHECK_THROWS_WITH(outside.num_batches(), Contains("the sampler gave index 7 in epoch 0, outside the dataset's 7 samples"));
  CHECK_THROWS_WITH(DataLoader(dataset, {.shuffle = true,
                                         .sampler = [](int64_t) { return std::vector<int64_t>{0}; }}),
                    Contains("shuffle = true and a sampler were both given"));
}
