// data/dataset.cpp — the default batch of a Dataset (its examples stacked row by row) and
// the batch tensors every dataset fills.
#include "memgrad/data/dataset.h"

#include <cstring>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::data {

Tensor batch_tensor(int64_t rows, const Shape& sample_shape, DType dtype, bool pin_memory) {
  Shape sizes = sample_shape;
  sizes.insert(0, rows);
  return empty(sizes, {.dtype = dtype, .category = MemoryCategory::Input, .pin_memory = pin_memory});
}

std::vector<Tensor> Dataset::get_batch(std::span<const int64_t> indices, bool pin_memory) const {
  MG_CHECK(!indices.empty(), "Dataset::get_batch: no indices. Hint: a batch holds at least one example.");
  const auto rows = static_cast<int64_t>(indices.size());
  std::vector<Tensor> batch;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t index = indices[static_cast<size_t>(row)];
    const Example example = get(index);
    if (row == 0) {
      MG_CHECK(!example.empty(), "Dataset::get(", index, ") returned no tensors. Hint: an example holds at least one.");
      for (const Tensor& tensor : example) {
        MG_CHECK(tensor.defined() && tensor.device().is_cpu(), "Dataset::get(", index, ") returned ",
                 tensor.defined() ? "a tensor on " + tensor.device().str() : std::string("an undefined tensor"),
                 "; the loader stacks examples in host memory. Hint: return CPU tensors.");
        batch.push_back(batch_tensor(rows, tensor.sizes(), tensor.dtype(), pin_memory));
      }
    }
    MG_CHECK(example.size() == batch.size(), "Dataset::get(", index, ") returned ", example.size(),
             " tensors, but get(", indices[0], ") returned ", batch.size(),
             ". Hint: every example of a dataset holds the same tensors.");
    for (size_t position = 0; position < batch.size(); ++position) {
      const Tensor& tensor = example[position];
      Tensor& stacked = batch[position];
      const Shape sample_shape(stacked.sizes().begin() + 1, stacked.sizes().end());
      MG_CHECK(tensor.defined() && tensor.device().is_cpu(), "Dataset::get(", index, ")'s tensor ", position,
               " is ", tensor.defined() ? "on " + tensor.device().str() : std::string("undefined"),
               ". Hint: return defined CPU tensors.");
      MG_CHECK(tensor.sizes() == sample_shape && tensor.dtype() == stacked.dtype(), "Dataset::get(", index,
               ")'s tensor ", position, " is ", tensor.dtype(), " ", tensor.sizes(), ", but get(", indices[0],
               ")'s is ", stacked.dtype(), " ", sample_shape, ". Hint: every example's tensor ", position,
               " has one shape and dtype (pad or crop in get()).");
      const size_t bytes = tensor.nbytes();
      std::memcpy(static_cast<char*>(stacked.raw_data()) + static_cast<size_t>(row) * bytes,
                  tensor.contiguous().raw_data(), bytes);
    }
  }
  return batch;
}

}  // namespace mg::data
