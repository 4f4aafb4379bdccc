// data/dataloader.cpp — batching, per-epoch orders, the gather into (optionally pinned)
// host memory, the copy to the device, and the prefetching thread.
#include "memgrad/data/dataloader.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/data/permutation.h"
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
  position_ = 0;
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
  const bool more = options_.prefetch > 0 ? next_prefetched(batch) : build_next(batch);
  if (more) ++served_;
  return more;
}

bool DataLoader::build_next(Batch& batch) {
  const int64_t remaining = static_cast<int64_t>(order_.size()) - position_;
  const int64_t batch_size = std::min(options_.batch_size, remaining);
  if (batch_size <= 0 || (options_.drop_last && batch_size < options_.batch_size)) return false;

  // Pinned host memory only helps (and only exists) for copies to a CUDA device.
  const bool pinned = options_.pin_memory && options_.device.is_cuda();
  const std::span<const int64_t> indices(order_.data() + position_, static_cast<size_t>(batch_size));
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
  position_ += batch_size;
  batch = Batch::from_tensors(std::move(tensors));
  return true;
}

// ---- prefetching ----
//
// One thread per epoch, started by the epoch's first next() (so a loader that is built but
// not yet iterated holds no prefetched memory) and joined at the epoch's end, by reset() or
// by the destructor. It is the only one to call build_next() meanwhile, so batches come in
// exactly the order they would without it.

bool DataLoader::next_prefetched(Batch& batch) {
  if (prefetch_state_ == PrefetchState::Idle) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.clear();
      stop_ = false;
      worker_done_ = false;
      worker_error_ = nullptr;
    }
    worker_ = std::thread(&DataLoader::prefetch_epoch, this);
    prefetch_state_ = PrefetchState::Running;
  }
  if (prefetch_state_ == PrefetchState::Running) {
    std::unique_lock<std::mutex> lock(mutex_);
    has_batch_.wait(lock, [this] { return !queue_.empty() || worker_done_; });
    if (!queue_.empty()) {
      batch = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      has_room_.notify_one();
      for (size_t i = 0; i < batch.num_tensors(); ++i) memory::mark_input_taken(batch[i].storage()->data());
      return true;
    }
    lock.unlock();
    worker_.join();
    prefetch_state_ = PrefetchState::Finished;
  }
  // The epoch is over, or ended early by the worker's error: the same answer on every call
  // until reset(), as without prefetching.
  std::lock_guard<std::mutex> lock(mutex_);
  if (worker_error_) std::rethrow_exception(worker_error_);
  return false;
}

void DataLoader::prefetch_epoch() {
  const size_t capacity = static_cast<size_t>(options_.prefetch);
  for (;;) {
    {
      // NOTE: waiting for room before building (not after) bounds the batches alive ahead
      // of the consumer to `prefetch`, the one being built included.
      std::unique_lock<std::mutex> lock(mutex_);
      has_room_.wait(lock, [&] { return stop_ || queue_.size() < capacity; });
      if (stop_) return;
    }
    Batch batch;
    bool more = false;
    try {
      const memory::PreparedInputScope ahead;  // no step's leftovers while they wait (memory/recorder.h)
      more = build_next(batch);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_error_ = std::current_exception();
      more = false;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;  // `batch` is dropped
      if (more) {
        queue_.push_back(std::move(batch));
      } else {
        worker_done_ = true;
      }
    }
    has_batch_.notify_one();
    if (!more) return;
  }
}

void DataLoader::stop_prefetching() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    has_room_.notify_all();
    worker_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.clear();
  worker_error_ = nullptr;
  prefetch_state_ = PrefetchState::Idle;
}

}  // namespace mg::data
