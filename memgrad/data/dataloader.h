// data/dataloader.h — DataLoader: cuts an MnistDataset into batches, shuffled per epoch,
// converted to normalised float32 and tagged INPUT (this is where that fact is known).
//
//   DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (const Batch& batch : loader) { ... }   // each loop is a new epoch
//
// NOTE: the shuffle is data/permutation.h's random_permutation seeded with seed + epoch,
// so a seed gives the same batches everywhere.
//
// A `.sampler` chooses each epoch's samples instead (e.g. a distributed::DistributedSampler,
// which gives every rank its own shard):
//   .sampler = [&](int64_t epoch) { return sampler.indices(epoch); }
//
// For a GPU, `.pin_memory = true` assembles each batch in page-locked host memory and
// copies it with to(device, /*non_blocking=*/true), and `.prefetch = N` lets a background
// thread prepare up to N batches ahead while the GPU trains on the current one. Prefetched
// batches are the same batches, in the same order; they are INPUT memory too, so a loader
// with prefetch N holds up to N + 1 batches (N ahead, plus the one being used).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "memgrad/core/device.h"
#include "memgrad/data/dataset.h"

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
  // CUDA devices: build batches in pinned host memory and copy them without blocking the
  // host. Ignored for other devices (pinned memory exists for CUDA copies only).
  bool pin_memory = false;
  // Batches prepared ahead by a background thread (0: each batch is built when asked for).
  int prefetch = 0;
  // When set, the dataset indices of each epoch, in order (called once per epoch, with the
  // epoch from 0); replaces `shuffle`, which must then be false.
  std::function<std::vector<int64_t>(int64_t epoch)> sampler = nullptr;
};

class DataLoader {
 public:
  // Keeps handles to the dataset's tensors (not a copy of their bytes).
  explicit DataLoader(const MnistDataset& dataset, DataLoaderOptions options = {});
  // Stops the prefetching thread (if any), dropping the batches it prepared.
  ~DataLoader();
  // NOTE: not copyable or movable: the prefetching thread works on this object.
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t num_batches() const;
  // The epoch being served, from 0.
  int64_t epoch() const { return epoch_; }

  // Fills `batch` with the next batch of the epoch; false (and `batch` emptied) when the
  // epoch is over. With prefetch, an error met by the background thread is thrown here,
  // after the batches prepared before it.
  bool next(Batch& batch);
  // Starts the next epoch (reshuffled when shuffling); a prefetching thread still working
  // on the current epoch is stopped first.
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
  // Builds the batch at position_ and moves position_ past it; false at the epoch's end.
  bool build_next(Batch& batch);
  // The prefetching thread: builds this epoch's batches into the queue, at most
  // options_.prefetch ahead of the consumer.
  void prefetch_epoch();
  bool next_prefetched(Batch& batch);
  void stop_prefetching();

  MnistDataset dataset_;
  DataLoaderOptions options_;
  // What each of the 256 pixel values becomes: (value / 255 - mean) / std.
  float normalized_[256];
  std::vector<int64_t> order_;  // dataset indices in the order of this epoch
  int64_t epoch_ = 0;
  // Index into order_ of the next batch's first sample. NOTE: while the prefetching thread
  // runs, it alone touches position_ (and reads order_).
  int64_t position_ = 0;
  int64_t served_ = 0;          // batches next() has returned in this epoch

  // ---- prefetching (options_.prefetch > 0) ----
  enum class PrefetchState { Idle, Running, Finished };
  PrefetchState prefetch_state_ = PrefetchState::Idle;  // of this epoch; consumer's view
  std::thread worker_;
  std::mutex mutex_;                   // guards the members below
  std::condition_variable has_room_;   // the queue shrank, or stop_ was set
  std::condition_variable has_batch_;  // the queue grew, or the worker finished
  std::deque<Batch> queue_;
  bool stop_ = false;                  // the consumer asks the worker to end now
  bool worker_done_ = false;           // the worker built its last batch (or failed)
  std::exception_ptr worker_error_;    // what the worker threw, for the consumer
};

}  // namespace mg::data
