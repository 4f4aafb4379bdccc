// docs/guide/data.h — the data every program of the guide trains on: the synthetic
// dataset's two splits, in-memory tensors, as TensorDatasets and their DataLoaders
// ("Data" in docs/guide.md).
#pragma once

#include <memgrad/memgrad.h>

#include "synthetic_data.h"

// [guide: data]
struct Data {
  explicit Data(mg::Device device)
      : train_set({synthetic.train.images, synthetic.train.labels}),  // (N, 64) float32, (N) int64
        test_set({synthetic.test.images, synthetic.test.labels}),
        train_loader(train_set, {.batch_size = 64, .shuffle = true, .seed = 1,
                                 .device = device,
                                 // On a GPU: copy from pinned memory, prepare 2 batches ahead.
                                 .pin_memory = device.is_cuda(), .prefetch = device.is_cuda() ? 2 : 0}),
        test_loader(test_set, {.batch_size = 256, .device = device}) {}

  SyntheticData synthetic;  // 4,096 + 1,024 8x8 images of 10 classes, as CPU tensors
  mg::data::TensorDataset train_set, test_set;
  mg::data::DataLoader train_loader, test_loader;
};
// [guide: end]
