// data/dataloader.h — DataLoader: cuts any Dataset into batches, shuffled per epoch,
// gathered on the host (pinned for a GPU), copied to the device without blocking and
// tagged INPUT (this is where that fact is known).
//
//   mg::data::TensorDataset dataset({inputs, targets});
//   mg::data::DataLoader loader(dataset, {.batch_size = 128, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (const mg::data::Batch& batch : loader) { ... }   // each loop is a new epoch
//
// Lifetime: a loader made from a reference borrows the dataset, which must outlive it (a
// temporary is refused at compile time); one made from a shared_ptr shares it, and
// make_data_loader(dataset, options) moves the dataset into the loader it returns.
//
// Order: epoch e's samples are data/permutation.h's random_permutation seeded with
// seed + e (so a seed gives the same batches everywhere, and a resumed run the same as
// one that never stopped), or 0, 1, ... without shuffling, or whatever a `.sampler`
// returns for the epoch (e.g. a distributed::DistributedSampler's shard):
//   .sampler = [&](int64_t epoch) { return sampler.indices(epoch); }
// set_epoch(e) makes the next loop serve epoch e (resuming a run after e epochs). The
// order is computed when the epoch's first batch or num_batches() is asked for, so a
// sampler that draws from a generator draws for exactly the epochs served.
//
// For a GPU, `.pin_memory = true` gathers each batch in page-locked host memory and copies
// it with to(device, /*non_blocking=*/true), and `.prefetch = N` lets a background thread
// prepare up to N batches ahead while the GPU trains on the current one. Prefetched
// batches are the same batches, in the same order; they are INPUT memory too, so a loader
// with prefetch N holds up to N + 1 batches (N ahead, plus the one being used). A
// memory::Recorder does not count the waiting ones as a step's leftovers, and counts a
// batch as allocated by the step that takes it (memory::mark_input_taken).
//
// `.workers = W` (with prefetch) has W threads build batches at once, each a whole batch,
// still served in order: for datasets whose get_batch is slow (decoding, augmentation);
// TensorDataset's and MnistDataset's gathers are far faster than a GPU step with one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "memgrad/core/device.h"
#include "memgrad/data/batch.h"
#include "memgrad/data/dataset.h"

namespace mg::data {

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;
  // Leaves out the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  // Batches are gathered on the host, then copied here.
  Device device = Device::cpu();
  // CUDA devices: gather batches in pinned host memory and copy them without blocking the
  // host. Ignored for other devices (pinned memory exists for CUDA copies only).
  bool pin_memory = false;
  // Batches prepared ahead by background threads (0: each batch is built when asked for).
  int prefetch = 0;
  // Threads preparing them (with prefetch > 0), each building whole batches; more than
  // `prefetch` would wait for room.
  int workers = 1;
  // When set, the dataset indices of each epoch, in order (called once per epoch served,
  // with the epoch from 0); replaces `shuffle`, which must then be false.
  std::function<std::vector<int64_t>(int64_t epoch)> sampler = nullptr;
};

class DataLoader {
 public:
  // Borrows `dataset`: it must outlive the loader.
  explicit DataLoader(const Dataset& dataset, DataLoaderOptions options = {});
  // Shares `dataset`.
  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  // NOTE: a temporary dataset would die before the loader reads it: pass a named one, a
  // shared_ptr, or use make_data_loader().
  DataLoader(const Dataset&& dataset, DataLoaderOptions options = {}) = delete;
  // Stops the prefetching threads (if any), dropping the batches they prepared.
  ~DataLoader();
  // NOTE: not copyable or movable: the prefetching threads work on this object.
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const Dataset& dataset() const { return *dataset_; }
  // Samples in every batch but perhaps an epoch's last.
  int64_t batch_size() const { return options_.batch_size; }
  int64_t num_batches() const;
  // The epoch being served, from 0.
  int64_t epoch() const { return epoch_; }

  // Fills `batch` with the next batch of the epoch; false (and `batch` emptied) when the
  // epoch is over. With prefetch, an error met by a background thread is thrown here,
  // after the batches before the one that failed.
  bool next(Batch& batch);
  // Starts the next epoch (reshuffled when shuffling); prefetching threads still working
  // on the current epoch are stopped first.
  void reset();
  // Makes epoch `epoch` the one served next, from its first batch, as if reset() had been
  // called until it came: a run resumed after e epochs calls set_epoch(e) once.
  void set_epoch(int64_t epoch);

  // Input iterator over one epoch: begin() starts a new epoch, unless the current one has
  // not served a batch yet (so the first loop serves epoch 0, and the first loop after
  // set_epoch(e) serves epoch e).
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
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return it.loader_ == nullptr; }

   private:
    DataLoader* loader_ = nullptr;
    Batch batch_;
  };
  Iterator begin();
  std::default_sentinel_t end() const { return std::default_sentinel; }

 private:
  void start_epoch(int64_t epoch);
  // Computes this epoch's order_ unless done (the sampler is called here).
  void ensure_order() const;
  // Builds batch `index` of this epoch (its samples from order_[index * batch_size]);
  // false past the epoch's end. Thread-safe: order_ is fixed while an epoch is served.
  bool build_batch(int64_t index, Batch& batch) const;
  // A prefetching thread: claims the next batch to build, at most options_.prefetch ahead
  // of the consumer, builds it and files it under its index.
  void prefetch_batches();
  bool next_prefetched(Batch& batch);
  void stop_prefetching();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  // The dataset indices of this epoch, in order; computed on first use (ensure_order).
  mutable std::vector<int64_t> order_;
  mutable bool has_order_ = false;
  int64_t served_ = 0;  // batches next() has returned in this epoch

  // ---- prefetching (options_.prefetch > 0) ----
  enum class PrefetchState { Idle, Running, Finished };
  PrefetchState prefetch_state_ = PrefetchState::Idle;  // of this epoch; consumer's view
  std::vector<std::thread> workers_;
  std::mutex mutex_;                   // guards the members below
  std::condition_variable has_room_;   // the consumer took a batch, or stop_ was set
  std::condition_variable has_batch_;  // a batch was filed, the end was found, or a worker left
  std::map<int64_t, Batch> ready_;     // built batches by index, waiting to be served
  int64_t next_to_build_ = 0;          // the index the next worker claims
  int64_t next_to_serve_ = 0;          // the index the consumer waits for
  int64_t end_batch_ = 0;              // the first index found not to exist (or to have failed)
  int running_workers_ = 0;
  bool stop_ = false;                  // the consumer asks the workers to end now
  std::exception_ptr worker_error_;    // what the batch at end_batch_ threw, if it did
};

// A loader that owns `dataset` (moved in), as libtorch's make_data_loader:
//   auto loader = mg::data::make_data_loader(mg::data::TensorDataset({x, y}), {.batch_size = 32});
//   for (const mg::data::Batch& batch : *loader) ...
template <typename D>
  requires std::is_base_of_v<Dataset, std::remove_cvref_t<D>>
std::unique_ptr<DataLoader> make_data_loader(D&& dataset, DataLoaderOptions options = {}) {
  return std::make_unique<DataLoader>(std::make_shared<const std::remove_cvref_t<D>>(std::forward<D>(dataset)),
                                      std::move(options));
}

}  // namespace mg::data
