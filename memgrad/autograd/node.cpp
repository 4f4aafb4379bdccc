// autograd/node.cpp — node bookkeeping: sequence numbers, hooks, gradient edges, and the
// forward origin anomaly mode keeps.
#include "memgrad/autograd/node.h"

#include <atomic>

#include "memgrad/autograd/accumulate_grad.h"
#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/print.h"

namespace mg::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

Node::Node(const char* name, uint32_t num_outputs)
    : name_(name), num_outputs_(num_outputs), sequence_nr_(next_sequence_nr.fetch_add(1)) {
  register_grad_fn_namer([](const Node& node) { return node.name(); });  // for Tensor::str()
  if (is_anomaly_enabled()) forward_origin_ = std::make_unique<const ForwardOrigin>(current_forward_origin());
}

Node::~Node() {
  // While one destructor drains the stack, nested destructors only push their edges onto it.
  static thread_local std::vector<std::shared_ptr<Node>>* draining = nullptr;
  if (draining) {
    for (Edge& edge : next_edges_) {
      if (edge.function) draining->push_back(std::move(edge.function));
    }
    return;
  }
  std::vector<std::shared_ptr<Node>> stack;
  for (Edge& edge : next_edges_) {
    if (edge.function) stack.push_back(std::move(edge.function));
  }
  draining = &stack;
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    node.reset();  // if this was the last owner, its destructor pushes its edges onto `stack`
  }
  draining = nullptr;
}

void Node::add_output_hook(uint32_t output_nr, TensorHook hook) {
  output_hooks_.emplace_back(output_nr, std::move(hook));
}

void Node::add_retained_output(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor) {
  retained_outputs_.emplace_back(output_nr, std::move(tensor));
}

void Node::run_output_hooks(std::vector<Tensor>& grad_outputs) {
  for (auto& [output_nr, hook] : output_hooks_) {
    if (!grad_outputs[output_nr].defined()) continue;
    Tensor replaced = hook(grad_outputs[output_nr]);
    if (replaced.defined()) grad_outputs[output_nr] = replaced;
  }
  for (auto& [output_nr, weak_tensor] : retained_outputs_) {
    std::shared_ptr<TensorImpl> impl = weak_tensor.lock();
    if (!impl || !grad_outputs[output_nr].defined()) continue;
    Tensor tensor(impl);
    Tensor grad = contiguous_copy(grad_outputs[output_nr]);
    grad.set_memory_category(MemoryCategory::Gradient);
    Tensor previous = tensor.grad();
    if (previous.defined()) {
      NoGradGuard no_grad;
      previous.add_(grad);
    } else {
      tensor.ensure_autograd_meta().grad = grad;
    }
  }
}

Edge gradient_edge(const Tensor& tensor) {
  if (!tensor.defined() || !tensor.requires_grad()) return {};
  const AutogradMeta* meta = tensor.autograd_meta();
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  return {grad_accumulator(tensor), 0};
}

}  // namespace mg::autograd
