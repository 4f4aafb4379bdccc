// autograd/accumulate_grad.h — the node at the end of every path: it adds the incoming
// gradient into a leaf's .grad, where the bytes become GRADIENT memory, then runs the
// leaf's post-accumulate-grad hooks (Tensor::register_post_accumulate_grad_hook).
#pragma once

#include "memgrad/autograd/node.h"

namespace mg::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;

 private:
  // Adds `grad` (after the leaf's register_hook hooks) into the leaf's .grad.
  void accumulate(Tensor grad);

  Tensor leaf_;
};

// The leaf's AccumulateGrad node, created on first use and shared while a graph holds it.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace mg::autograd
