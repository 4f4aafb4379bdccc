// autograd/accumulate_grad.cpp — accumulation into leaf gradients.
#include "memgrad/autograd/accumulate_grad.h"

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"

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
  // The gradient takes its leaf's layout (a channels_last weight gets a channels_last
  // .grad, as in PyTorch): fused optimizers walk a parameter and its gradient as one flat
  // array each, so the two must agree element for element.
  MemoryFormat layout = suggest_memory_format(leaf_);
  Tensor owned = std::move(grad);
  if (owned.dtype() != leaf_.dtype()) owned = converted_copy(owned, leaf_.dtype(), leaf_.device());
  // NOTE: take the incoming buffer itself when nothing else refers to it (the common case),
  // instead of copying it; otherwise (e.g. the same gradient flows to two leaves) copy.
  bool sole_owner = owned.impl_ptr().use_count() == 1 && owned.storage().use_count() == 1 &&
                    is_contiguous_in(owned, layout) && owned.storage_offset() == 0 &&
                    owned.storage()->nbytes() == owned.nbytes();
  if (!sole_owner) owned = contiguous_copy(owned, layout);
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
