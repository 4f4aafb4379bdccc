// nn/functional.h — Functional: a module made from a function, so that a step with no
// layer of its own (a reshape, an activation with a setting, x * x) can sit in a
// nn::Sequential, as libtorch's torch::nn::Functional:
//
//   auto model = std::make_shared<mg::nn::Sequential>(
//       std::make_shared<mg::nn::Linear>(4, 8),
//       std::make_shared<mg::nn::Functional>([](const mg::Tensor& x) { return mg::relu(x) * x; }, "relu_times_x"),
//       std::make_shared<mg::nn::Linear>(8, 1));
//
// It has no parameters or buffers: tensors the function captures are not registered, so
// neither an optimizer nor state_dict() sees them (make them a module's parameters).
#pragma once

#include <functional>
#include <string>

#include "memgrad/nn/module.h"

namespace mg::nn {

class Functional : public Module {
 public:
  using Function = std::function<Tensor(const Tensor&)>;

  // `name` only labels the module where it is printed: "Functional(relu_times_x)". Inside a
  // container the memory Recorder names its call by its place there ("1", or the name given
  // to push_back), as for any module.
  explicit Functional(Function function, std::string name = "");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return name_; }

 private:
  Function function_;
  std::string name_;
};

}  // namespace mg::nn
