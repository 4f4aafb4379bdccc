// data/dataloader.cpp — batching, per-epoch shuffling and the uint8 → float32 gather.
#include "data/dataloader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/factory.h"

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
  start_epoch(0);
}

int64_t DataLoader::num_batches() const {
  const int64_t size = dataset_.size();
  return options_.drop_last ? size / options_.batch_size
                            : (size + options_.batch_size - 1) / options_.batch_size;
}

void DataLoader::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  order_.resize(dataset_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!options_.shuffle) return;
  std::mt19937_64 engine(options_.seed + static_cast<uint64_t>(epoch));
  for (int64_t i = dataset_.size() - 1; i > 0; --i) {
    // NOTE: the modulo's bias is below 2^-40 for any dataset that fits in memory.
    const auto j = static_cast<int64_t>(engine() % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

void DataLoader::reset() { start_epoch(epoch_ + 1); }

DataLoader::Iterator DataLoader::begin() {
  if (position_ > 0) reset();
  return Iterator(this);
}

bool DataLoader::next(Batch& batch) {
  // NOTE: dropping the previous batch first lets its bytes be reused for this one, so a
  // loop holds one batch of INPUT memory rather than two.
  batch = Batch{};
  const int64_t remaining = dataset_.size() - position_;
  const int64_t batch_size = std::min(options_.batch_size, remaining);
  if (batch_size <= 0 || (options_.drop_last && batch_size < options_.batch_size)) return false;

  const Shape image_shape = dataset_.image_shape();
  const int64_t pixels_per_image = image_shape.numel();
  const Shape input_shape = options_.flatten
                                ? Shape{batch_size, pixels_per_image}
                                : Shape{batch_size, 1, image_shape[0], image_shape[1]};
  Tensor inputs = empty(input_shape, {.dtype = DType::Float32, .category = MemoryCategory::Input});
  Tensor targets = empty({batch_size}, {.dtype = DType::Int64, .category = MemoryCategory::Input});

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
    inputs = inputs.to(options_.device);
    targets = targets.to(options_.device);
    inputs.set_memory_category(MemoryCategory::Input);
    targets.set_memory_category(MemoryCategory::Input);
  }
  batch = {std::move(inputs), std::move(targets)};
  return true;
}

}  // namespace mg::data
