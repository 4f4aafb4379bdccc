// data/dataloader.cpp — batching, per-epoch shuffling, the uint8 → float32 gather into
// (optionally pinned) host memory, the copy to the device, and the prefetching thread.
#include "memgrad/data/dataloader.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/data/permutation.h"

namespace mg::data {

DataLoader::DataLoader(const MnistDataset& dataset, DataLoaderOptions options)
    : dataset_(dataset), options_(options) {
  MG_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ",
           options_.batch_size, ".");
  const Normalization& normalization = dataset_.normalization();
  for (int value = 0; value < 256; ++value) {
    normalized_[value] =
        static_cast<float>((value / 255.0 - normalization.mean) / normalization.std);
  }
  MG_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be 0 or more batches, got ",
           options_.prefetch, ".");
  MG_CHECK(!(options_.sampler && options_.shuffle),
           "DataLoader: shuffle = true and a sampler were both given; the sampler chooses each "
           "epoch's order. Hint: leave shuffle false and let the sampler shuffle.");
  start_epoch(0);
}

DataLoader::~DataLoader() { stop_prefetching(); }

int64_t DataLoader::num_batches() const {
  const auto size = static_cast<int64_t>(order_.size());
  return options_.drop_last ? size / options_.batch_size
                            : (size + options_.batch_size - 1) / options_.batch_size;
}

void DataLoader::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  served_ = 0;
  if (options_.sampler) {
    order_ = options_.sampler(epoch);
    for (const int64_t sample : order_) {
      MG_CHECK(sample >= 0 && sample < dataset_.size(), "DataLoader: the sampler gave index ",
               sample, " in epoch ", epoch, ", outside the dataset's ", dataset_.size(),
               " samples. Hint: build the sampler with this dataset's size.");
    }
  } else if (options_.shuffle) {
    order_ = random_permutation(dataset_.size(), options_.seed + static_cast<uint64_t>(epoch));
  } else {
    order_.resize(dataset_.size());
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
}

void DataLoader::reset() {
  stop_prefetching();
  start_epoch(epoch_ + 1);
}

DataLoader::Iterator DataLoader::begin() {
  if (served_ > 0) reset();
  return Iterator(this);
}

bool DataLoader::next(Batch& batch) {
  // NOTE: dropping the previous batch first lets its bytes be reused for this one, so a
  // loop holds one batch of INPUT memory rather than two (plus those prefetched).
  batch = Batch{};
  const bool more = options_.prefetch > 0 ? next_prefetched(batch) : build_next(batch);
  if (more) ++served_;
  return more;
}

bool DataLoader::build_next(Batch& batch) {
  const int64_t remaining = static_cast<int64_t>(order_.size()) - position_;
  const int64_t batch_size = std::min(options_.batch_size, remaining);
  if (batch_size <= 0 || (options_.drop_last && batch_size < options_.batch_size)) return false;

  const Shape image_shape = dataset_.image_shape();
  const int64_t pixels_per_image = image_shape.numel();
  const Shape input_shape = options_.flatten
                                ? Shape{batch_size, pixels_per_image}
                                : Shape{batch_size, 1, image_shape[0], image_shape[1]};
  // Pinned host memory only helps (and only exists) for copies to a CUDA device.
  const bool pinned = options_.pin_memory && options_.device.is_cuda();
  Tensor inputs = empty(input_shape, {.dtype = DType::Float32,
                                      .category = MemoryCategory::Input,
                                      .pin_memory = pinned});
  Tensor targets = empty({batch_size}, {.dtype = DType::Int64,
                                        .category = MemoryCategory::Input,
                                        .pin_memory = pinned});

  const uint8_t* pixels = dataset_.images().data_ptr<uint8_t>();
  const int64_t* labels = dataset_.labels().data_ptr<int64_t>();
  float* input_values = inputs.data_ptr<float>();
  int64_t* target_values = targets.data_ptr<int64_t>();
  for (int64_t row = 0; row < batch_size; ++row) {
    const int64_t sample = order_[position_ + row];
    const uint8_t* image = pixels + sample * pixels_per_image;
    float* out = input_values + row * pixels_per_image;
    for (int64_t pixel = 0; pixel < pixels_per_image; ++pixel) out[pixel] = normalized_[image[pixel]];
    target_values[row] = labels[sample];
  }
  position_ += batch_size;

  if (!options_.device.is_cpu()) {
    // NOTE: from pinned memory the copy is queued on the current stream and the host goes
    // on; the pinned block stays reserved until that copy has run, so dropping `inputs`
    // here is safe.
    inputs = inputs.to(options_.device, /*non_blocking=*/pinned);
    targets = targets.to(options_.device, /*non_blocking=*/pinned);
    inputs.set_memory_category(MemoryCategory::Input);
    targets.set_memory_category(MemoryCategory::Input);
  }
  batch = {std::move(inputs), std::move(targets)};
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
