// tests/data/epoch_batches.h — what the DataLoader tests compare: every value of every
// batch of one epoch, in order (float32 inputs, int64 targets).
#pragma once

#include <cstdint>
#include <vector>

#include "memgrad/data/dataloader.h"

namespace mg_test {

struct BatchValues {
  std::vector<float> inputs;
  std::vector<int64_t> targets;
  friend bool operator==(const BatchValues&, const BatchValues&) = default;
};

inline std::vector<BatchValues> epoch_batches(mg::data::DataLoader& loader) {
  std::vector<BatchValues> batches;
  for (const mg::data::Batch& batch : loader) {
    batches.push_back({batch.inputs.to_vector<float>(), batch.targets.to_vector<int64_t>()});
  }
  return batches;
}

}  // namespace mg_test
