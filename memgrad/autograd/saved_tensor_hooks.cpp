// autograd/saved_tensor_hooks.cpp — the per-thread stack of saved-tensor hooks.
//
// One stack per thread: the top entry is what current_saved_tensor_hooks() returns. A
// DisableSavedTensorHooks scope pushes a null entry, so "innermost wins" also covers
// switching hooks off (and back on, by a guard nested inside it).
#include "memgrad/autograd/saved_tensor_hooks.h"

#include <vector>

#include "memgrad/core/error.h"

namespace mg::autograd {

namespace {

std::vector<std::shared_ptr<const SavedTensorHookPair>>& hook_stack() {
  thread_local std::vector<std::shared_ptr<const SavedTensorHookPair>> stack;
  return stack;
}

}  // namespace

SavedTensorHooks::SavedTensorHooks(PackHook pack, UnpackHook unpack) {
  MG_CHECK(pack && unpack, "SavedTensorHooks needs both a pack and an unpack function, but ",
           pack ? "unpack" : "pack", " is empty. Hint: to save tensors plainly in a scope, use "
           "DisableSavedTensorHooks instead.");
  hook_stack().push_back(
      std::make_shared<const SavedTensorHookPair>(SavedTensorHookPair{std::move(pack), std::move(unpack)}));
}

SavedTensorHooks::~SavedTensorHooks() { hook_stack().pop_back(); }

DisableSavedTensorHooks::DisableSavedTensorHooks() { hook_stack().push_back(nullptr); }

DisableSavedTensorHooks::~DisableSavedTensorHooks() { hook_stack().pop_back(); }

const std::shared_ptr<const SavedTensorHookPair>& current_saved_tensor_hooks() {
  static const std::shared_ptr<const SavedTensorHookPair> none;
  const auto& stack = hook_stack();
  return stack.empty() ? none : stack.back();
}

}  // namespace mg::autograd
