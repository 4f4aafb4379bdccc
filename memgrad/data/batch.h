// data/batch.h — Batch, what a DataLoader yields: one stacked tensor per tensor of the
// dataset's examples, each with the batch as its first dimension.
//
// The first two have names, because most datasets are (input, target) pairs and most
// loops read them by name; any others follow in `rest`:
//
//   for (const mg::data::Batch& batch : loader)
//     loss = mg::cross_entropy(model(batch.inputs), batch.targets);
//
// A dataset of one tensor yields batches whose `targets` is undefined; one of three has
// its third in rest[0]. batch[i] reads the i-th tensor, whichever field holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::data {

struct Batch {
  Tensor inputs;              // the examples' first tensor, stacked: (B, ...)
  Tensor targets;             // their second (undefined when examples hold one tensor)
  std::vector<Tensor> rest{};  // their third and later

  // The tensors of a batch in the dataset's order.
  static Batch from_tensors(std::vector<Tensor> tensors);

  // How many tensors the batch holds (0 for an empty Batch).
  size_t num_tensors() const;
  // The i-th tensor (0: inputs, 1: targets, 2: rest[0], ...); throws mg::Error past the end.
  const Tensor& operator[](size_t index) const;
  // The samples in the batch: the first dimension of its tensors.
  int64_t size() const;
};

}  // namespace mg::data
