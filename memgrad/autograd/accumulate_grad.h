// autograd/accumulate_grad.h — the node at the end of every path: it adds the incoming
// gradient into a leaf's .grad, where the bytes become GRADIENT memory, then runs the
// leaf's post-accumulate-grad hooks (Tensor::register_post_accumulate_grad_hook).
//
// A leaf nobody watches during backward (no hooks, no retain_grad on its node, not inside
// checkpoint's recomputation, whose caller reads the gradients it leaves) may take
// its gradient in another floating dtype: autocast's casts of float32 parameters hand
// their 16-bit gradients through unconverted (autograd/copy.cpp), and the leaf's first
// gradient of the backward call is converted at the call's end, together with every other
// such leaf's, in one batched conversion (one kernel launch per device and dtype pair
// instead of one per parameter).
#pragma once

#include "memgrad/autograd/node.h"

namespace mg::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  // Where the leaf has no hooks: the leaf is alive without the graph, nothing to free.
  bool may_run_on_side_stream() const override;

  // Whether a gradient of another floating dtype than the leaf's may be handed here: no
  // hook, retain_grad or recomputing checkpoint would see it before it is converted.
  bool takes_unconverted_gradient() const;

 private:
  // Whether hooks or retain_grad() see the leaf's gradient as it arrives.
  bool watched() const;
  // Adds `grad` (after the leaf's register_hook hooks) into the leaf's .grad.
  void accumulate(Tensor grad);

  Tensor leaf_;
};

// The leaf's AccumulateGrad node, created on first use and shared while a graph holds it.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace mg::autograd
