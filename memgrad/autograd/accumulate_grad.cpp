// autograd/accumulate_grad.cpp — accumulation into leaf gradients, and the hooks that run
// once a leaf's gradient has been accumulated.
#include "memgrad/autograd/accumulate_grad.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"

namespace mg::autograd {

namespace {

// Leaves whose gradients wait, unconverted, for the end of the backward call.
struct PendingConversions {
  std::vector<std::pair<Tensor, Tensor>> leaves_and_gradients;
};

// The batch the running backward call fills; it lives in the call's end-of-backward
// callback, so a call that fails drops it with its callbacks.
thread_local std::weak_ptr<PendingConversions> open_batch;

// Each waiting gradient converted to its leaf's dtype, in the leaf's layout (one batched
// conversion for those already dense in it, autograd/copy.h), becomes the leaf's .grad.
void convert_pending(const PendingConversions& batch) {
  std::vector<Tensor> dense;  // gradients laid out as their leaves' .grad will be
  std::vector<size_t> dense_at;
  std::vector<Tensor> converted(batch.leaves_and_gradients.size());
  for (size_t i = 0; i < batch.leaves_and_gradients.size(); ++i) {
    const auto& [leaf, gradient] = batch.leaves_and_gradients[i];
    const MemoryFormat layout = suggest_memory_format(leaf);
    if (leaf.dtype() == DType::Float32 && suggest_memory_format(gradient) == layout &&
        is_contiguous_in(gradient, layout)) {
      dense.push_back(gradient);
      dense_at.push_back(i);
    } else {
      converted[i] = converted_copy(gradient, leaf.dtype(), leaf.device(), false, layout);
    }
  }
  std::vector<Tensor> batched = to_each(dense, DType::Float32);
  for (size_t j = 0; j < batched.size(); ++j) converted[dense_at[j]] = std::move(batched[j]);
  for (size_t i = 0; i < converted.size(); ++i) {
    AutogradMeta& meta = batch.leaves_and_gradients[i].first.ensure_autograd_meta();
    // A nested backward call may have delivered to the same leaf already.
    if (meta.grad.defined()) {
      meta.grad.add_(converted[i]);
      continue;
    }
    converted[i].set_memory_category(MemoryCategory::Gradient);
    meta.grad = std::move(converted[i]);
  }
}

void convert_at_backward_end(Tensor leaf, Tensor gradient) {
  std::shared_ptr<PendingConversions> batch = open_batch.lock();
  if (!batch) {
    batch = std::make_shared<PendingConversions>();
    open_batch = batch;
    queue_callback([batch] { convert_pending(*batch); });
  }
  batch->leaves_and_gradients.emplace_back(std::move(leaf), std::move(gradient));
}

}  // namespace

AccumulateGrad::AccumulateGrad(Tensor leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) { run_first(); }

bool AccumulateGrad::watched() const {
  const AutogradMeta* meta = leaf_.autograd_meta();
  return has_output_observers() ||
         (meta != nullptr && (!meta->hooks.empty() || !meta->post_accumulate_grad_hooks.empty()));
}

bool AccumulateGrad::takes_unconverted_gradient() const { return in_outermost_backward() && !watched(); }

bool AccumulateGrad::may_run_on_side_stream() const { return !watched(); }

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor grad = std::move(grad_outputs[0]);
  if (!grad.defined()) return {};
  const bool unconverted = grad.dtype() != leaf_.dtype() && grad.device() == leaf_.device();
  if (unconverted && takes_unconverted_gradient() && !leaf_.grad().defined()) {
    convert_at_backward_end(leaf_, std::move(grad));
    return {};
  }
  accumulate(std::move(grad));
  AutogradMeta& meta = *leaf_.autograd_meta();
  if (meta.post_accumulate_grad_hooks.empty()) return {};
  // A copy: a hook may remove itself (or another) while they run.
  const auto hooks = meta.post_accumulate_grad_hooks;
  for (const auto& [id, hook] : hooks) hook(leaf_);
  return {};
}

void AccumulateGrad::accumulate(Tensor grad) {
  AutogradMeta& meta = leaf_.ensure_autograd_meta();
  for (const TensorHook& hook : meta.hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  MG_ASSERT(grad.sizes() == leaf_.sizes(), "gradient of shape ", grad.sizes(),
            " for a leaf of shape ", leaf_.sizes());
  if (meta.grad.defined()) {
    if (grad.dtype() != meta.grad.dtype()) grad = converted_copy(grad, meta.grad.dtype(), meta.grad.device());
    meta.grad.add_(grad);  // in place: accumulation costs no new memory
    return;
  }
  // The gradient takes its leaf's layout (a channels_last weight gets a channels_last
  // .grad, as in PyTorch): fused optimizers walk a parameter and its gradient as one flat
  // array each, so the two must agree element for element.
  MemoryFormat layout = suggest_memory_format(leaf_);
  Tensor owned = std::move(grad);
  if (owned.dtype() != leaf_.dtype()) owned = converted_copy(owned, leaf_.dtype(), leaf_.device());
  // NOTE: take the incoming buffer itself when nothing else refers to it (the common case),
  // instead of copying it; otherwise (e.g. the same gradient flows to two leaves) copy.
  if (!sole_owner(owned) || !is_contiguous_in(owned, layout)) owned = contiguous_copy(owned, layout);
  owned.set_memory_category(MemoryCategory::Gradient);
  meta.grad = owned;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = leaf.ensure_autograd_meta();
  std::shared_ptr<Node> existing = meta.grad_accumulator.lock();
  if (existing) return existing;
  auto created = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = created;
  return created;
}

}  // namespace mg::autograd

namespace mg {

uint64_t Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  MG_CHECK(requires_grad() && is_leaf(), "register_post_accumulate_grad_hook: the tensor (shape ",
           sizes(), ") is ", requires_grad() ? "not a leaf" : "a tensor that does not require grad",
           "; only leaves that require grad have a .grad to accumulate into. Hint: on a "
           "non-leaf, register_hook sees its gradient.");
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
  ensure_autograd_meta().post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) const {
  AutogradMeta* meta = autograd_meta();
  if (meta == nullptr) return;
  std::erase_if(meta->post_accumulate_grad_hooks, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace mg
