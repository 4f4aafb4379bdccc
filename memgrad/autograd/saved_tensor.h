// autograd/saved_tensor.h — a tensor a Node keeps for its backward.
//
// Saving marks the storage as ACTIVATION memory (if it was an intermediate result), records
// the storage's version so an in-place change before backward is caught, and keeps an
// alias without autograd history (so a node saving its own output makes no cycle).
// release() drops the reference as soon as the node's backward has run: that is what
// returns activation memory during backward rather than after it.
//
// Under SavedTensorHooks (autograd/saved_tensor_hooks.h) the tensor is packed at save time
// and the SavedTensor keeps the packed object instead; unpack() then calls the hooks'
// unpack.
#pragma once

#include <cstdint>
#include <memory>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  ~SavedTensor();
  SavedTensor(SavedTensor&& other) noexcept;
  SavedTensor& operator=(SavedTensor&& other) noexcept;
  SavedTensor(const SavedTensor&) = delete;
  SavedTensor& operator=(const SavedTensor&) = delete;

  // The saved tensor; throws mg::Error naming `op` when it was released by an earlier
  // backward, modified in place since it was saved, or when an unpack hook fails.
  Tensor unpack(const char* op) const;
  void release();
  bool was_saved() const { return was_saved_; }

 private:
  struct Packed;  // what is kept under saved-tensor hooks (saved_tensor.cpp)

  Tensor data_;                     // without hooks: an alias of the saved tensor
  std::unique_ptr<Packed> packed_;  // with hooks: the pack hook's result and its context
  uint64_t saved_version_ = 0;
  bool was_saved_ = false;  // false for an undefined tensor (e.g. a missing bias)
};

}  // namespace mg::autograd
