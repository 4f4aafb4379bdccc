// autograd/accumulate_grad.cpp — accumulation into leaf gradients.
#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace mg::autograd {

AccumulateGrad::AccumulateGrad(Tensor leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) { run_first(); }

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor grad = std::move(grad_outputs[0]);
  if (!grad.defined()) return {};
  AutogradMeta& meta = leaf_.ensure_autograd_meta();
  for (const TensorHook& hook : meta.hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  MG_ASSERT(grad.sizes() == leaf_.sizes(), "gradient of shape ", grad.sizes(),
            " for a leaf of shape ", leaf_.sizes());
  if (meta.grad.defined()) {
    meta.grad.add_(grad);  // in place: accumulation costs no new memory
    return {};
  }
  // NOTE: take the incoming buffer itself when nothing else refers to it (the common case),
  // instead of copying it; otherwise (e.g. the same gradient flows to two leaves) copy.
  bool sole_owner = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1 &&
                    grad.is_contiguous() && grad.storage_offset() == 0 &&
                    grad.storage()->nbytes() == grad.nbytes();
  Tensor owned = sole_owner ? grad : contiguous_copy(grad);
  if (owned.dtype() != leaf_.dtype()) owned = converted_copy(owned, leaf_.dtype(), leaf_.device());
  owned.set_memory_category(MemoryCategory::Gradient);
  meta.grad = owned;
  return {};
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
