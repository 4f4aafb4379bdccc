// autograd/backward.cpp — the Tensor methods that start or observe backward (backward,
// register_hook, retain_grad). They have no header here: core/tensor.h declares them with
// the rest of Tensor, and they are defined in autograd/ because they call the engine, a
// room above core (as PyTorch's TensorBody methods are defined in ATen).
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/node.h"

namespace mg {

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  checked("backward");  // `mg::Tensor loss; loss.backward();` names the call, not the engine
  autograd::backward({*this}, {gradient}, retain_graph);
}

void Tensor::register_hook(TensorHook hook) const {
  MG_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that does not "
           "require grad (shape ", sizes(), ")");
  if (is_leaf()) {
    ensure_autograd_meta().hooks.push_back(std::move(hook));
  } else {
    grad_fn()->add_output_hook(autograd_meta()->output_nr, std::move(hook));
  }
}

void Tensor::retain_grad() const {
  MG_CHECK(requires_grad(), "retain_grad: the tensor (shape ", sizes(), ") does not require grad");
  if (is_leaf()) return;  // leaves keep .grad anyway
  AutogradMeta& meta = ensure_autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  meta.grad_fn->add_retained_output(meta.output_nr, impl_ptr());
}

}  // namespace mg
