// data/batch.cpp — a Batch's tensors by position.
#include "memgrad/data/batch.h"

#include <utility>

#include "memgrad/core/error.h"

namespace mg::data {

Batch Batch::from_tensors(std::vector<Tensor> tensors) {
  Batch batch;
  if (!tensors.empty()) batch.inputs = std::move(tensors[0]);
  if (tensors.size() > 1) batch.targets = std::move(tensors[1]);
  for (size_t i = 2; i < tensors.size(); ++i) batch.rest.push_back(std::move(tensors[i]));
  return batch;
}

size_t Batch::num_tensors() const {
  if (!rest.empty()) return 2 + rest.size();
  return targets.defined() ? 2 : inputs.defined() ? 1 : 0;
}

const Tensor& Batch::operator[](size_t index) const {
  MG_CHECK(index < num_tensors(), "Batch: tensor ", index, " asked of a batch of ", num_tensors(), " tensors.");
  return index == 0 ? inputs : index == 1 ? targets : rest[index - 2];
}

int64_t Batch::size() const { return inputs.defined() ? inputs.size(0) : 0; }

}  // namespace mg::data
