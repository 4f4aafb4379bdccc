// data/tensor_dataset.h — TensorDataset: in-memory tensors that share their first
// dimension, example i being row i of each (PyTorch's torch.utils.data.TensorDataset).
//
//   mg::Tensor x = mg::randn({1000, 20});                                 // (N, 20) features
//   mg::Tensor y = mg::randint(0, 3, {1000}, {.dtype = mg::DType::Int64});  // (N) labels
//   mg::data::TensorDataset dataset({x, y});
//   mg::data::DataLoader loader(dataset, {.batch_size = 32, .shuffle = true, .seed = 1});
//   for (const mg::data::Batch& batch : loader) ...   // batch.inputs (32, 20), batch.targets (32)
//
// Any number of tensors, of any dtypes: one (inputs only), two (inputs, targets), three
// or more (the third on in Batch::rest). A batch is gathered row by row straight into the
// batch's memory, pinned when the loader asks for it.
//
// NOTE: the tensors stay where they are, on the CPU: the loader gathers batches on the
// host and copies each batch to its device. CUDA tensors are refused (gathering them would
// mean a copy to the host and back for every batch); move them with .to(Device::cpu())
// first. The dataset keeps handles to the tensors (no copy of their bytes, unless one is
// not contiguous) and tags their storage INPUT: a dataset's bytes are input memory.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/data/dataset.h"

namespace mg::data {

class TensorDataset : public Dataset {
 public:
  // Throws mg::Error naming every shape when the tensors do not share their first
  // dimension, or naming the tensor when there are none, one is undefined, a scalar, or
  // not on the CPU.
  explicit TensorDataset(std::vector<Tensor> tensors);

  int64_t size() const override { return tensors_[0].size(0); }
  // Row `index` of each tensor (views of the dataset's memory).
  Example get(int64_t index) const override;
  // The rows at `indices` of each tensor, copied into new batch tensors.
  std::vector<Tensor> get_batch(std::span<const int64_t> indices, bool pin_memory) const override;

  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;  // contiguous, on the CPU
};

}  // namespace mg::data
