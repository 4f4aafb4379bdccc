// autograd/function.h — how an op records itself in the graph.
//
// An op computes its output, then, if needs_grad(inputs...), calls
//
//   record("MulBackward", out, {a, b}, saved(a, b),
//          [](const Node& node, const Tensor& grad, const Tensor& a, const Tensor& b) {
//            return std::vector<Tensor>{node.needs_input_grad(0) ? mul(grad, b) : Tensor(),
//                                       node.needs_input_grad(1) ? mul(grad, a) : Tensor()};
//          });
//
// so that forward and backward stay side by side. The lambda receives the node (to skip
// gradients nobody needs), the gradient of the output, and the saved tensors unpacked; it
// returns one gradient per input. Backward runs with grad mode off.
#pragma once

#include <array>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/saved_tensor.h"

namespace mg::autograd {

// True when grad mode is on and any input requires grad.
template <class... Tensors>
bool needs_grad(const Tensors&... inputs) {
  return GradMode::is_enabled() && (... || (inputs.defined() && inputs.requires_grad()));
}
bool any_needs_grad(const std::vector<Tensor>& inputs);

template <size_t kSaved>
struct SavedTensors {
  std::array<SavedTensor, kSaved> tensors;
};

// The tensors a node keeps for backward (undefined tensors are allowed, e.g. no bias).
template <class... Tensors>
SavedTensors<sizeof...(Tensors)> saved(const Tensors&... tensors) {
  return {{SavedTensor(tensors)...}};
}

// A single-output node whose backward is a lambda over its saved tensors.
template <size_t kSaved, class Backward>
class FunctionNode final : public Node {
 public:
  FunctionNode(const char* name, SavedTensors<kSaved>&& saved_tensors, Backward backward)
      : Node(name), saved_(std::move(saved_tensors)), backward_(std::move(backward)) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    std::array<Tensor, kSaved> unpacked;
    for (size_t i = 0; i < kSaved; ++i) unpacked[i] = saved_.tensors[i].unpack(name());
    return std::apply([&](const auto&... tensors) { return backward_(*this, grad_outputs[0], tensors...); },
                      unpacked);
  }

  void release_saved() override {
    for (SavedTensor& tensor : saved_.tensors) tensor.release();
  }
  bool may_run_on_side_stream() const override { return kSaved == 0 && !has_output_observers(); }

 private:
  SavedTensors<kSaved> saved_;
  Backward backward_;
};

// Makes `output` the result of `node`, whose inputs are `inputs`.
void connect(const std::shared_ptr<Node>& node, const Tensor& output, const std::vector<Tensor>& inputs);

template <size_t kSaved, class Backward>
void record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs,
            SavedTensors<kSaved>&& saved_tensors, Backward backward) {
  connect(std::make_shared<FunctionNode<kSaved, Backward>>(name, std::move(saved_tensors), std::move(backward)),
          output, inputs);
}

}  // namespace mg::autograd
