// data/dataset.h — Dataset, what a DataLoader reads: a number of examples, each a list of
// tensors (an image and its label, a sequence and its targets, ...), fetched by index.
//
//   class Squares : public mg::data::Dataset {
//    public:
//     int64_t size() const override { return 100; }
//     mg::data::Example get(int64_t i) const override {
//       return {mg::full({1}, double(i)), mg::full({1}, double(i * i))};   // (x, x^2)
//     }
//   };
//   mg::data::DataLoader loader(squares, {.batch_size = 10});   // batches of (10, 1), (10, 1)
//
// A loader asks for a whole batch at once (get_batch). The default gathers get(i) for
// each index and stacks each tensor position along a new first dimension; a dataset whose
// samples sit in one buffer overrides it to copy rows straight into the batch
// (TensorDataset, MnistDataset), which saves a tensor per sample.
//
// NOTE: get() and get_batch() are const and a DataLoader with prefetch calls them from its
// background thread while the owner may call them too: a dataset must not change itself
// when read (keep caches behind a lock, or build them up front).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memgrad/core/dtype.h"
#include "memgrad/core/shape.h"
#include "memgrad/core/tensor.h"

namespace mg::data {

// One sample: its tensors, in an order the dataset documents (e.g. image, label).
using Example = std::vector<Tensor>;

class Dataset {
 public:
  virtual ~Dataset() = default;

  // The number of examples; get() takes indices 0 .. size() - 1.
  virtual int64_t size() const = 0;
  // Example `index`: CPU tensors, the same count, shapes and dtypes for every index.
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices` (each in range, as the loader checks), each tensor position
  // stacked into one CPU tensor of shape (indices.size(), ...): the tensors of a batch.
  // They are new INPUT tensors, in pinned host memory when `pin_memory` is true (make
  // them with batch_tensor()). The default stacks get(i); it throws mg::Error naming the
  // index when an example's tensors differ from the first one's in count, shape or dtype.
  virtual std::vector<Tensor> get_batch(std::span<const int64_t> indices, bool pin_memory) const;
};

// An uninitialised (rows, sample_shape...) CPU tensor of `dtype`, tagged INPUT, pinned when
// `pin_memory` is true: what get_batch() fills.
Tensor batch_tensor(int64_t rows, const Shape& sample_shape, DType dtype, bool pin_memory);

}  // namespace mg::data
