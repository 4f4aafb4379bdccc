// core/tensor_index.h — what Tensor::index() takes, spelled as libtorch spells it:
//
//   using namespace mg::indexing;
//   x.index({Slice(), 0})                 // x[:, 0]
//   x.index({Ellipsis, Slice(1, None)})   // x[..., 1:]
//   x.index({None, Slice(None, None, 2)}) // x[None, ::2]
//   x.index({indices})                    // x[indices], indices a 1-d int64 tensor
//
// The op itself (views for integers and slices, a gather for tensors) is autograd/indexing.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>

#include "memgrad/core/tensor.h"

namespace mg::indexing {

// None: a new dimension of size 1 here (as unsqueeze); also "no bound" inside a Slice.
struct NoneIndex {
  constexpr operator std::optional<int64_t>() const { return std::nullopt; }
};
inline constexpr NoneIndex None{};

// Ellipsis: as many full slices as the dimensions the other indices leave.
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

// start:stop:step, with Python's meaning of missing and negative bounds.
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step.value_or(1)) {}
  std::optional<int64_t> start;
  std::optional<int64_t> stop;
  int64_t step;
};

class TensorIndex {
 public:
  using Value = std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor>;

  TensorIndex(int64_t integer) : value_(integer) {}
  TensorIndex(int integer) : value_(static_cast<int64_t>(integer)) {}
  TensorIndex(Slice slice) : value_(slice) {}
  TensorIndex(NoneIndex none) : value_(none) {}
  TensorIndex(EllipsisIndex ellipsis) : value_(ellipsis) {}
  TensorIndex(Tensor tensor) : value_(std::move(tensor)) {}

  const Value& value() const { return value_; }

 private:
  Value value_;
};

}  // namespace mg::indexing
