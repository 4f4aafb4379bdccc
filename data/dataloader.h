// data/dataloader.h — DataLoader: cuts an MnistDataset into batches, shuffled per epoch,
// converted to normalised float32 and tagged INPUT (this is where that fact is known).
//
//   DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (const Batch& batch : loader) { ... }   // each loop is a new epoch
//
// NOTE: the shuffle is a Fisher–Yates pass driven by std::mt19937_64 seeded with
// seed + epoch, written out here rather than std::shuffle (whose algorithm each standard
// library chooses), so a seed gives the same batches everywhere.
#pragma once

#include <cstdint>
#include <iterator>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"

namespace mg::data {

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;
  // Leaves out the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  // Inputs of shape (B, H*W), ready for a Linear layer, instead of (B, 1, H, W).
  bool flatten = false;
  // Batches are built on the host, then copied here.
  Device device = Device::cpu();
};

class DataLoader {
 public:
  // Keeps handles to the dataset's tensors (not a copy of their bytes).
  explicit DataLoader(const MnistDataset& dataset, DataLoaderOptions options = {});

  int64_t num_batches() const;
  // The epoch being served, from 0.
  int64_t epoch() const { return epoch_; }

  // Fills `batch` with the next batch of the epoch; false (and `batch` emptied) when the
  // epoch is over.
  bool next(Batch& batch);
  // Starts the next epoch (reshuffled when shuffling).
  void reset();

  // Input iterator over one epoch: begin() starts a new epoch, unless the current one has
  // not served a batch yet (so the first loop serves epoch 0).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator() = default;
    explicit Iterator(DataLoader* loader) : loader_(loader) { ++*this; }
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++() {
      if (!loader_->next(batch_)) loader_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) {
      return it.loader_ == nullptr;
    }

   private:
    DataLoader* loader_ = nullptr;
    Batch batch_;
  };
  Iterator begin();
  std::default_sentinel_t end() const { return std::default_sentinel; }

 private:
  void start_epoch(int64_t epoch);

  MnistDataset dataset_;
  DataLoaderOptions options_;
  // What each of the 256 pixel values becomes: (value / 255 - mean) / std.
  float normalized_[256];
  std::vector<int64_t> order_;  // dataset indices in the order of this epoch
  int64_t epoch_ = 0;
  int64_t position_ = 0;        // index into order_ of the next batch's first sample
};

}  // namespace mg::data
