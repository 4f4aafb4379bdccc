// autograd/saved_tensor_hooks.h — what happens to a tensor autograd saves for backward,
// as PyTorch's torch.autograd.graph.saved_tensors_hooks.
//
// While a SavedTensorHooks guard is alive on a thread, every tensor an op saves there is
// handed to `pack` at save time, and the graph keeps only what pack returned; when
// backward needs the tensor it calls `unpack` on that object. This is how saved
// activations can live elsewhere than in device memory (SaveOnCpu, autograd/save_on_cpu.h),
// be compressed, or be stored in another dtype:
//
//   mg::autograd::SavedTensorHooks as_double(
//       [](const Tensor& saved) -> std::any { return saved.to(DType::Float64); },
//       [](const std::any& packed) { return std::any_cast<Tensor>(packed).to(DType::Float32); });
//   Tensor loss = model(x).sum();   // every saved tensor is now held in float64
//   loss.backward();                // ... and read back as float32
//
// Rules (see autograd/saved_tensor.cpp for how SavedTensor applies them):
// - Guards nest: the innermost one packs. A tensor is always unpacked by the hooks that
//   packed it, even when backward runs after the guard is gone.
// - pack receives an alias of the saved tensor without autograd history (keeping it makes
//   no reference cycle), and must not modify it. unpack must give back a tensor of the
//   saved sizes, dtype and device (checked), and may be called more than once per packed
//   object (backward with retain_graph).
// - Inside pack and unpack no hooks are active, so ops they run save plainly instead of
//   recursing; DisableSavedTensorHooks does the same for any scope.
// - A packed object that is a Tensor counts as ACTIVATION memory, like a plainly saved
//   tensor; the bytes behind any other packed object are the hooks' to tag.
#pragma once

#include <any>
#include <functional>
#include <memory>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

using PackHook = std::function<std::any(const Tensor& saved)>;
using UnpackHook = std::function<Tensor(const std::any& packed)>;

struct SavedTensorHookPair {
  PackHook pack;
  UnpackHook unpack;
};

// Installs pack/unpack for this thread for the guard's lifetime. Guards must end in the
// reverse order of their creation (as scopes do).
class SavedTensorHooks {
 public:
  SavedTensorHooks(PackHook pack, UnpackHook unpack);
  ~SavedTensorHooks();
  SavedTensorHooks(const SavedTensorHooks&) = delete;
  SavedTensorHooks& operator=(const SavedTensorHooks&) = delete;
};

// Saves tensors plainly in a scope, whatever hooks enclose it.
class DisableSavedTensorHooks {
 public:
  DisableSavedTensorHooks();
  ~DisableSavedTensorHooks();
  DisableSavedTensorHooks(const DisableSavedTensorHooks&) = delete;
  DisableSavedTensorHooks& operator=(const DisableSavedTensorHooks&) = delete;
};

// The hooks a tensor saved now on this thread goes through; null when there are none (no
// guard, or inside a hook or a DisableSavedTensorHooks scope). Shared, so that saved
// tensors can still unpack after the guard has ended.
const std::shared_ptr<const SavedTensorHookPair>& current_saved_tensor_hooks();

}  // namespace mg::autograd
