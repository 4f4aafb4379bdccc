// autograd/function.cpp — connecting a new node to its inputs and output (and naming the
// memory its forward op allocated, for a running memory::Recorder).
#include "memgrad/autograd/function.h"

#include "memgrad/memory/recorder.h"

namespace mg::autograd {

bool any_needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& input : inputs) {
    if (input.defined() && input.requires_grad()) return true;
  }
  return false;
}

void connect(const std::shared_ptr<Node>& node, const Tensor& output, const std::vector<Tensor>& inputs) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& input : inputs) edges.push_back(gradient_edge(input));
  node->set_next_edges(std::move(edges));
  AutogradMeta& meta = output.ensure_autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = 0;
  // The op's forward allocations happened before this point: name them now (see
  // memory/recorder.h, "Op names").
  if (memory::detail::recording()) memory::detail::label_forward_op(node.get(), node->name());
}

}  // namespace mg::autograd
