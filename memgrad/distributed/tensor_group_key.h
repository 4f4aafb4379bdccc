// distributed/tensor_group_key.h — the key by which tensors are packed together into one
// flat tensor for a collective (broadcast chunks, gradient buckets): one flat tensor has
// one dtype and lives on one device.
#pragma once

#include <tuple>

#include "memgrad/core/tensor.h"

namespace mg::distributed {

using TensorGroupKey = std::tuple<DType, DeviceType, int>;

inline TensorGroupKey tensor_group_key(const Tensor& tensor) {
  return {tensor.dtype(), tensor.device().type, tensor.device().index};
}

}  // namespace mg::distributed
