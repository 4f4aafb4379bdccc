// data/dataloader.cpp — batching, per-epoch orders, the gather into (optionally pinned)
// host memory, the copy to the device, and the prefetching thread.
#include "memgrad/data/dataloader.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <span>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/data/permutation.h"
#include "memgrad/memory/context.h"
#include "memgrad/memory/recorder.h"

namespace mg::data {
namespace {

// A shared_ptr that does not own: for a borrowed dataset.
std::shared_ptr<const Dataset> borrowed(const Dataset& dataset) {
  return std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &dataset);
}

}  // namespace

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : DataLoader(borrowed(dataset), std::move(options)) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  MG_CHECK(dataset_ != nullptr, "DataLoader: no dataset (a null shared_ptr).");
  MG_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ", options_.batch_size, ".");
  MG_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be 0 or more batches, got ", options_.prefetch, ".");
  MG_CHECK(options_.workers >= 1, "DataLoader: workers must be 1 or more threads, got ", options_.workers,
           ". Hint: prefetch = 0 builds every batch on the calling thread.");
  MG_CHECK(!(options_.sampler && options_.shuffle),
           "DataLoader: shuffle = true and a sampler were both given; the sampler chooses each "
           "epoch's order. Hint: leave shuffle false and let the sampler shuffle.");
  start_epoch(0);
}

DataLoader::~DataLoader() { stop_prefetching(); }

int64_t DataLoader::num_batches() const {
  ensure_order();
  const auto size = static_cast<int64_t>(order_.size());
  return options_.drop_last ? size / options_.batch_size : (size + options_.batch_size - 1) / options_.batch_size;
}

void DataLoader::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  served_ = 0;
  order_.clear();
  has_order_ = false;
}

void DataLoader::ensure_order() const {
  if (has_order_) return;
  const int64_t size = dataset_->size();
  if (options_.sampler) {
    order_ = options_.sampler(epoch_);
    for (const int64_t sample : order_) {
      MG_CHECK(sample >= 0 && sample < size, "DataLoader: the sampler gave index ", sample, " in epoch ", epoch_,
               ", outside the dataset's ", size, " samples. Hint: build the sampler with this dataset's size.");
    }
  } else if (options_.shuffle) {
    order_ = random_permutation(size, options_.seed + static_cast<uint64_t>(epoch_));
  } else {
    order_.resize(static_cast<size_t>(size));
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
  has_order_ = true;
}

void DataLoader::reset() { set_epoch(epoch_ + 1); }

void DataLoader::set_epoch(int64_t epoch) {
  MG_CHECK(epoch >= 0, "DataLoader::set_epoch: epochs count from 0, got ", epoch, ".");
  stop_prefetching();
  start_epoch(epoch);
}

DataLoader::Iterator DataLoader::begin() {
  if (served_ > 0) reset();
  return Iterator(this);
}

bool DataLoader::next(Batch& batch) {
  // NOTE: dropping the previous batch first lets its bytes be reused for this one, so a
  // loop holds one batch of INPUT memory rather than two (plus those prefetched).
  batch = Batch{};
  ensure_order();
  const bool more = options_.prefetch > 0 ? next_prefetched(batch) : build_batch(served_, batch);
  if (more) ++served_;
  return more;
}

bool DataLoader::build_batch(int64_t index, Batch& batch) const {
  memory::OpScope op("DataLoader");  // the batch's memory, in a memory::Recorder
  const int64_t position = index * options_.batch_size;
  const int64_t remaining = static_cast<int64_t>(order_.size()) - position;
  const int64_t batch_size = std::min(options_.batch_size, remaining);
  if (batch_size <= 0 || (options_.drop_last && batch_size < options_.batch_size)) return false;

  // Pinned host memory only helps (and only exists) for copies to a CUDA device.
  const bool pinned = options_.pin_memory && options_.device.is_cuda();
  const std::span<const int64_t> indices(order_.data() + position, static_cast<size_t>(batch_size));
  std::vector<Tensor> tensors = dataset_->get_batch(indices, pinned);
  MG_CHECK(!tensors.empty(), "DataLoader: the dataset's get_batch returned no tensors for ", batch_size, " samples.");
  for (Tensor& tensor : tensors) {
    MG_CHECK(tensor.defined() && tensor.dim() >= 1 && tensor.size(0) == batch_size,
             "DataLoader: the dataset's get_batch returned a tensor of shape ",
             tensor.defined() ? tensor.sizes() : Shape{}, " for ", batch_size,
             " samples. Hint: each tensor of a batch has one row per sample along its first dimension.");
    if (!options_.device.is_cpu()) {
      // NOTE: from pinned memory the copy is queued on the current stream and the host goes
      // on; the pinned block stays reserved until that copy has run, so dropping the host
      // tensor here is safe.
      tensor = tensor.to(options_.device, /*non_blocking=*/tensor.is_pinned());
    }
    tensor.set_memory_category(MemoryCategory::Input);
  }
  batch = Batch::from_tensors(std::move(tensors));
  return true;
}

// ---- prefetching ----
//
// `workers` threads per epoch, started by the epoch's first next() (so a loader that is
// built but not yet iterated holds no prefetched memory) and joined at the epoch's end, by
// reset() or by the destructor. Each claims the next batch index, builds that batch and
// files it under its index; the consumer serves the indices in order, so batches come in
// exactly the order they would without prefetching, however the threads interleave.

bool DataLoader::next_prefetched(Batch& batch) {
  if (prefetch_state_ == PrefetchState::Idle) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.clear();
      next_to_build_ = next_to_serve_ = served_;
      end_batch_ = std::numeric_limits<int64_t>::max();
      running_workers_ = options_.workers;
      stop_ = false;
      worker_error_ = nullptr;
    }
    for (int w = 0; w < options_.workers; ++w) workers_.emplace_back(&DataLoader::prefetch_batches, this);
    prefetch_state_ = PrefetchState::Running;
  }
  if (prefetch_state_ == PrefetchState::Running) {
    std::unique_lock<std::mutex> lock(mutex_);
    has_batch_.wait(lock, [this] {
      return ready_.contains(next_to_serve_) || next_to_serve_ >= end_batch_ || running_workers_ == 0;
    });
    if (auto found = ready_.find(next_to_serve_); found != ready_.end()) {
      batch = std::move(found->second);
      ready_.erase(found);
      ++next_to_serve_;
      lock.unlock();
      has_room_.notify_all();
      for (size_t i = 0; i < batch.num_tensors(); ++i) memory::mark_input_taken(batch[i].storage()->data());
      return true;
    }
    lock.unlock();
    for (std::thread& worker : workers_) worker.join();  // they stop at end_batch_
    workers_.clear();
    prefetch_state_ = PrefetchState::Finished;
  }
  // The epoch is over, or ended early by a batch that failed: the same answer on every
  // call until reset(), as without prefetching.
  std::lock_guard<std::mutex> lock(mutex_);
  if (worker_error_) std::rethrow_exception(worker_error_);
  return false;
}

void DataLoader::prefetch_batches() {
  const int64_t capacity = options_.prefetch;
  for (;;) {
    int64_t index = 0;
    {
      // NOTE: claiming only within `prefetch` of the consumer (not building first and
      // waiting after) bounds the batches alive ahead of it to `prefetch`, those being
      // built included.
      std::unique_lock<std::mutex> lock(mutex_);
      has_room_.wait(lock, [&] {
        return stop_ || next_to_build_ >= end_batch_ || next_to_build_ - next_to_serve_ < capacity;
      });
      if (stop_ || next_to_build_ >= end_batch_) break;
      index = next_to_build_++;
    }
    Batch batch;
    bool more = false;
    std::exception_ptr error;
    try {
      const memory::PreparedInputScope ahead;  // no step's leftovers while they wait (memory/recorder.h)
      more = build_batch(index, batch);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) break;  // `batch` is dropped
      if (more) {
        ready_.emplace(index, std::move(batch));
      } else if (index < end_batch_) {  // the epoch ends here (or fails here: the earliest failure wins)
        end_batch_ = index;
        worker_error_ = error;
        for (auto later = ready_.upper_bound(index); later != ready_.end();) later = ready_.erase(later);
      }
    }
    has_batch_.notify_all();
    has_room_.notify_all();  // the end may have moved: waiting workers re-check it
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_workers_;
  }
  has_batch_.notify_all();
}

void DataLoader::stop_prefetching() {
  if (!workers_.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    has_room_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
  worker_error_ = nullptr;
  prefetch_state_ = PrefetchState::Idle;
}

}  // namespace mg::data
