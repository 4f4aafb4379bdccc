// data/tensor_dataset.cpp — checking the tensors share their first dimension, and the
// row gather that makes a batch.
#include "memgrad/data/tensor_dataset.h"

#include <cstring>
#include <sstream>
#include <utility>

#include "memgrad/core/error.h"

namespace mg::data {
namespace {

// "[100, 20] float32, [99] int64": every tensor, for an error message.
std::string shapes_text(const std::vector<Tensor>& tensors) {
  std::ostringstream text;
  for (size_t i = 0; i < tensors.size(); ++i) text << (i ? ", " : "") << tensors[i].sizes() << " " << tensors[i].dtype();
  return text.str();
}

}  // namespace

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  MG_CHECK(!tensors_.empty(), "TensorDataset: no tensors. Hint: pass at least one, e.g. TensorDataset({inputs, targets}).");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& tensor = tensors_[i];
    MG_CHECK(tensor.defined(), "TensorDataset: tensor ", i, " is undefined.");
    MG_CHECK(tensor.dim() >= 1, "TensorDataset: tensor ", i, " is a scalar; each tensor holds one row per example ",
             "along its first dimension.");
    MG_CHECK(tensor.device().is_cpu(), "TensorDataset: tensor ", i, " (", tensor.sizes(), " ", tensor.dtype(),
             ") is on ", tensor.device(), "; the loader gathers batches on the host and copies each to its device. ",
             "Hint: pass tensor.to(mg::Device::cpu()) and set DataLoaderOptions::device.");
  }
  for (const Tensor& tensor : tensors_) {
    MG_CHECK(tensor.size(0) == tensors_[0].size(0), "TensorDataset: the tensors must share their first dimension ",
             "(one row per example), but their shapes are ", shapes_text(tensors_), ".");
  }
  for (Tensor& tensor : tensors_) {
    tensor = tensor.detach().contiguous();
    tensor.set_memory_category(MemoryCategory::Input);
  }
}

Example TensorDataset::get(int64_t index) const {
  MG_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index, " outside the dataset's ", size(),
           " examples.");
  Example example;
  for (const Tensor& tensor : tensors_) example.push_back(tensor.select(0, index));
  return example;
}

std::vector<Tensor> TensorDataset::get_batch(std::span<const int64_t> indices, bool pin_memory) const {
  const auto rows = static_cast<int64_t>(indices.size());
  for (const int64_t index : indices) {  // once, not once per tensor
    MG_CHECK(index >= 0 && index < size(), "TensorDataset::get_batch: index ", index, " outside the dataset's ",
             size(), " examples.");
  }
  std::vector<Tensor> batch;
  for (const Tensor& tensor : tensors_) {
    const Shape sample_shape(tensor.sizes().begin() + 1, tensor.sizes().end());
    Tensor stacked = batch_tensor(rows, sample_shape, tensor.dtype(), pin_memory);
    const size_t row_bytes = static_cast<size_t>(sample_shape.numel()) * tensor.element_size();
    const char* source = static_cast<const char*>(tensor.raw_data());
    char* target = static_cast<char*>(stacked.raw_data());
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t index = indices[static_cast<size_t>(row)];
      std::memcpy(target + static_cast<size_t>(row) * row_bytes, source + static_cast<size_t>(index) * row_bytes,
                  row_bytes);
    }
    batch.push_back(std::move(stacked));
  }
  return batch;
}

}  // namespace mg::data
