// examples/gpt/windows.h — the text's windows as a dataset: example i is the window of
// block_size + 1 bytes starting at byte i, its first block_size bytes the input and its
// last block_size the targets (each position predicts the next byte). The program serves
// them through mg::data::DataLoader like any other dataset, with a sampler that draws the
// windows' offsets at random:
//
//   gpt::WindowsDataset windows(corpus.train, block_size);
//   mg::data::DataLoader loader(windows, gpt::random_window_batches(windows, generator, B, accum, device));
//   loader.set_epoch(step);   // here an epoch is one optimizer step: `accum` batches of B
//
// NOTE: the offsets come from an mg::Generator (Philox: a seed and an offset), drawn when
// a step's first batch is asked for, one randint of B offsets per batch: a run that
// restores the generator's saved state draws exactly the windows an uninterrupted run
// would (bench/gpt_loss_reference.py draws them the same way).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/core/random.h>
#include <memgrad/core/tensor.h>
#include <memgrad/data/dataloader.h>
#include <memgrad/data/dataset.h>

namespace gpt {

class WindowsDataset : public mg::data::Dataset {
 public:
  // Borrows `bytes` (which must outlive the dataset); throws mg::Error when they hold no
  // window of block_size + 1 bytes.
  WindowsDataset(const std::vector<uint8_t>& bytes, int64_t block_size);

  // The windows' start offsets: 0 .. bytes - block_size - 1.
  int64_t size() const override;
  // (inputs, targets): int64 (T) each, bytes offset .. offset+T-1 and offset+1 .. offset+T.
  mg::data::Example get(int64_t offset) const override;
  // (inputs, targets): int64 (B, T) each, copied straight from the bytes.
  std::vector<mg::Tensor> get_batch(std::span<const int64_t> offsets, bool pin_memory) const override;

  int64_t block_size() const { return block_size_; }

 private:
  // Window `offset`'s input and target bytes into `inputs` and `targets` (block_size each).
  void copy_window(int64_t offset, int64_t* inputs, int64_t* targets) const;

  const std::vector<uint8_t>* bytes_;
  int64_t block_size_;
};

// The options of a DataLoader over `windows` whose every epoch is `batches` batches of
// `batch_size` windows at random offsets, on `device` (gathered in pinned memory and copied
// without blocking on CUDA). Each batch's offsets are one randint over [0, windows.size())
// from `generator`, which must outlive the loader. With ranks > 1 every batch is drawn and
// only those of `rank` are served (batches rank, rank + ranks, ...): the ranks share out
// one sequence of windows.
mg::data::DataLoaderOptions random_window_batches(const WindowsDataset& windows, mg::Generator& generator,
                                                  int64_t batch_size, int64_t batches, mg::Device device,
                                                  int rank = 0, int ranks = 1);

}  // namespace gpt
