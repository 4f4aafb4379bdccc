// examples/gpt/windows.cpp — the windows of the text, gathered into batches, and their
// random offsets.
#include "examples/gpt/windows.h"

#include <utility>

#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>

namespace gpt {

WindowsDataset::WindowsDataset(const std::vector<uint8_t>& bytes, int64_t block_size)
    : bytes_(&bytes), block_size_(block_size) {
  MG_CHECK(block_size > 0 && static_cast<int64_t>(bytes.size()) >= block_size + 1, "WindowsDataset: ", bytes.size(),
           " bytes hold no window of block ", block_size, " + 1 bytes.");
}

int64_t WindowsDataset::size() const { return static_cast<int64_t>(bytes_->size()) - block_size_; }

void WindowsDataset::copy_window(int64_t offset, int64_t* inputs, int64_t* targets) const {
  MG_ASSERT(offset >= 0 && offset < size(), "the loader checks the sampler's offsets");
  const uint8_t* window = bytes_->data() + offset;
  for (int64_t t = 0; t < block_size_; ++t) {
    inputs[t] = window[t];
    targets[t] = window[t + 1];
  }
}

mg::data::Example WindowsDataset::get(int64_t offset) const {
  MG_CHECK(offset >= 0 && offset < size(), "WindowsDataset::get: offset ", offset, " outside the ", size(), " windows.");
  mg::Tensor inputs = mg::empty({block_size_}, {.dtype = mg::DType::Int64});
  mg::Tensor targets = mg::empty({block_size_}, {.dtype = mg::DType::Int64});
  copy_window(offset, inputs.data_ptr<int64_t>(), targets.data_ptr<int64_t>());
  return {std::move(inputs), std::move(targets)};
}

std::vector<mg::Tensor> WindowsDataset::get_batch(std::span<const int64_t> offsets, bool pin_memory) const {
  const auto rows = static_cast<int64_t>(offsets.size());
  mg::Tensor inputs = mg::data::batch_tensor(rows, {block_size_}, mg::DType::Int64, pin_memory);
  mg::Tensor targets = mg::data::batch_tensor(rows, {block_size_}, mg::DType::Int64, pin_memory);
  for (int64_t row = 0; row < rows; ++row) {
    copy_window(offsets[static_cast<size_t>(row)], inputs.data_ptr<int64_t>() + row * block_size_,
                targets.data_ptr<int64_t>() + row * block_size_);
  }
  return {std::move(inputs), std::move(targets)};
}

mg::data::DataLoaderOptions random_window_batches(const WindowsDataset& windows, mg::Generator& generator,
                                                  int64_t batch_size, int64_t batches, mg::Device device, int rank,
                                                  int ranks) {
  auto sampler = [&windows, &generator, batch_size, batches, rank, ranks](int64_t) {
    std::vector<int64_t> offsets;
    for (int64_t batch = 0; batch < batches; ++batch) {
      const std::vector<int64_t> drawn =
          mg::randint(0, windows.size(), {batch_size}, {.dtype = mg::DType::Int64}, &generator).to_vector<int64_t>();
      if (batch % ranks == rank) offsets.insert(offsets.end(), drawn.begin(), drawn.end());
    }
    return offsets;
  };
  return {.batch_size = batch_size, .device = device, .pin_memory = device.is_cuda(), .sampler = sampler};
}

}  // namespace gpt
