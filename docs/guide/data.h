// docs/guide/data.h — the data every program of the guide trains on: the synthetic
// MNIST-format dataset, its two splits and their DataLoaders ("Data" in docs/guide.md).
#pragma once

#include <memgrad/data/dataloader.h>
#include <memgrad/memgrad.h>

#include "synthetic_data.h"

// [guide: data]
struct Data {
  explicit Data(mg::Device device)
      : train_set(files.dir(), mg::data::Split::Train),
        // The test split is normalised with the training split's mean and std.
        test_set(files.dir(), mg::data::Split::Test, train_set.normalization()),
        train_loader(train_set, {.batch_size = 64, .shuffle = true, .seed = 1,
                                 .flatten = true,  // (B, 64) for a Linear, not (B, 1, 8, 8)
                                 .device = device,
                                 // On a GPU: copy from pinned memory, prepare 2 batches ahead.
                                 .pin_memory = device.is_cuda(), .prefetch = device.is_cuda() ? 2 : 0}),
        test_loader(test_set, {.batch_size = 256, .flatten = true, .device = device}) {}

  SyntheticMnist files;  // 4,096 + 1,024 8x8 images of 10 classes, written as IDX files
  mg::data::MnistDataset train_set, test_set;
  mg::data::DataLoader train_loader, test_loader;
};
// [guide: end]
